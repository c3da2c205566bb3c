"""Reads for the triggers' pages, API and CLI: lists per tenant (newest first, filtered),
a schedule's next ticks, a webhook's recent deliveries."""

from __future__ import annotations

import datetime as dt

from runtime import arguments
from runtime.models import DependencyTrigger, Schedule, Webhook, WebhookDelivery
from runtime.models.trigger import DEPENDENCY_STATES
from runtime.triggers import cron as cronlib
from runtime.triggers.dependencies import dependency_get
from runtime.triggers.schedules import schedule_get
from runtime.triggers.webhooks import webhook_get

LIST_MAX = 200

__all__ = [
    "DEPENDENCY_STATES",
    "dependency_get",
    "dependency_list",
    "schedule_get",
    "schedule_list",
    "schedule_upcoming",
    "webhook_deliveries",
    "webhook_get",
    "webhook_list",
]


def schedule_list(
    *, tenant: str, paused: bool | None = None, agent: str | None = None, limit: int = LIST_MAX
) -> list[Schedule]:
    qs = Schedule.objects.filter(tenant=tenant)
    if paused is not None:
        qs = qs.filter(paused=paused)
    if agent:
        qs = qs.filter(agent=arguments.agent_name(agent))
    return list(qs.order_by("name")[: min(limit, LIST_MAX)])


def schedule_upcoming(schedule: Schedule, count: int = 5) -> list[dt.datetime]:
    """The next `count` ticks, from the one that is due next (none while paused)."""
    if schedule.paused or schedule.next_fire_at is None:
        return []
    parsed, tz = cronlib.parse(schedule.cron), cronlib.zone(schedule.timezone)
    return [schedule.next_fire_at, *parsed.upcoming(schedule.next_fire_at, tz, max(0, count - 1))]


def webhook_list(
    *, tenant: str, paused: bool | None = None, agent: str | None = None, limit: int = LIST_MAX
) -> list[Webhook]:
    qs = Webhook.objects.filter(tenant=tenant).defer("secret_encrypted")
    if paused is not None:
        qs = qs.filter(paused=paused)
    if agent:
        qs = qs.filter(agent=arguments.agent_name(agent))
    return list(qs.order_by("name")[: min(limit, LIST_MAX)])


def webhook_deliveries(webhook: Webhook, limit: int = 50) -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.filter(webhook=webhook).order_by("-received_at")[: min(limit, LIST_MAX)])


def dependency_list(*, tenant: str, state: str | None = None, limit: int = LIST_MAX) -> list[DependencyTrigger]:
    qs = DependencyTrigger.objects.filter(tenant=tenant)
    if state:
        qs = qs.filter(state=state)
    return list(qs.order_by("-created_at")[: min(limit, LIST_MAX)])
