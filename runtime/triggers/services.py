"""Triggers: what starts a task without a person pressing submit. Cron schedules
(schedules.py), signed webhooks (webhooks.py) and dependency triggers (dependencies.py);
each submits through task_submit with a caller key that names the firing, so a firing
repeated by a race or a restart returns the task the first one made."""

from runtime.triggers.dependencies import (
    PREREQUISITES_MAX,
    dependencies_settle,
    dependency_create,
    dependency_get,
)
from runtime.triggers.schedules import (
    schedule_create,
    schedule_fire,
    schedule_get,
    schedule_pause,
    schedule_resume,
    schedules_fire_due,
    tick_key,
)
from runtime.triggers.webhooks import (
    webhook_body_limit,
    webhook_create,
    webhook_deliver,
    webhook_get,
    webhook_pause,
    webhook_resume,
)

__all__ = [
    "PREREQUISITES_MAX",
    "dependencies_settle",
    "dependency_create",
    "dependency_get",
    "schedule_create",
    "schedule_fire",
    "schedule_get",
    "schedule_pause",
    "schedule_resume",
    "schedules_fire_due",
    "tick_key",
    "webhook_body_limit",
    "webhook_create",
    "webhook_deliver",
    "webhook_get",
    "webhook_pause",
    "webhook_resume",
]
