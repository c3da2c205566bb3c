"""Schedule, Webhook, WebhookDelivery, DependencyTrigger: what starts a task without a
person pressing submit (runtime/triggers/). See runtime/models/__init__.py for what the
models share."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime.ids import uuid7
from runtime.models.choices import choices as _choices

MISSED_POLICIES = ("skip", "catch_up")  # late ticks: dropped, or one run for them all
OVERLAP_POLICIES = ("skip", "queue", "stop")  # previous run still live: drop, wait for it, stop it
DEPENDENCY_POLICIES = ("skip", "run", "fail")  # a prerequisite failed or was cancelled
DEPENDENCY_STATES = ("waiting", "fired", "skipped", "failed")


class _Target(models.Model):
    """What a trigger submits: task_submit's arguments, checked when the trigger is made
    and again (by task_submit) each time it fires."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    tenant = models.CharField(max_length=100)
    agent = models.CharField(max_length=200)
    input = models.JSONField(default=dict)
    owner = models.CharField(max_length=200)
    pool = models.CharField(max_length=100, null=True, blank=True)
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        abstract = True


class Schedule(_Target):
    """A cron schedule. `next_fire_at` is the one tick that is due next: firing it is one
    conditional UPDATE that moves it on (WHERE next_fire_at = the tick), in the same
    transaction as the submission, whose caller key is derived from (schedule, tick)."""

    name = models.CharField(max_length=100)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    missed_policy = models.CharField(max_length=16, choices=_choices(MISSED_POLICIES), default="skip")
    overlap_policy = models.CharField(max_length=16, choices=_choices(OVERLAP_POLICIES), default="skip")
    paused = models.BooleanField(default=False)
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_tick_at = models.DateTimeField(null=True, blank=True)
    last_task = models.ForeignKey(
        "runtime.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_schedule"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="schedule_tenant_name"),
            models.CheckConstraint(condition=Q(missed_policy__in=MISSED_POLICIES), name="schedule_missed_policy"),
            models.CheckConstraint(condition=Q(overlap_policy__in=OVERLAP_POLICIES), name="schedule_overlap_policy"),
        ]
        # The sweep's question every pass: which unpaused schedules are due.
        indexes = [models.Index(fields=["next_fire_at"], condition=Q(paused=False), name="schedule_due")]

    def __str__(self):
        return f"schedule {self.name} ({self.cron} {self.timezone})"


class Webhook(_Target):
    """A signed webhook: POST /hooks/<id>. The secret is kept encrypted (HMAC needs it in
    the clear to verify), under a key derived from the deployment's SECRET_KEY; it is
    shown once, when the webhook is made."""

    name = models.CharField(max_length=100)
    secret_encrypted = models.BinaryField()
    paused = models.BooleanField(default=False)

    class Meta:
        db_table = "steward_webhook"
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="webhook_tenant_name")]

    def __str__(self):
        return f"webhook {self.name}"


class WebhookDelivery(models.Model):
    """An accepted delivery. The unique (webhook, delivery_id) is what refuses a replay:
    two concurrent deliveries of one id cannot both insert."""

    id = models.BigAutoField(primary_key=True)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    delivery_id = models.CharField(max_length=200)
    body_digest = models.CharField(max_length=64)
    received_at = models.DateTimeField(db_default=Now())
    task = models.ForeignKey(
        "runtime.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )

    class Meta:
        db_table = "steward_webhook_delivery"
        constraints = [models.UniqueConstraint(fields=["webhook", "delivery_id"], name="webhook_delivery_once")]
        indexes = [models.Index(fields=["webhook", "-received_at"], name="webhook_delivery_recent")]

    def __str__(self):
        return f"delivery {self.delivery_id} of {self.webhook_id}"


class DependencyTrigger(_Target):
    """Start a task once every task in `prerequisites` completed. A prerequisite that
    failed or was cancelled decides by `on_failure`: skip (no task), run anyway, or fail
    (no task, and the trigger is recorded as failed)."""

    prerequisites = models.JSONField(default=list)  # task ids, as text
    on_failure = models.CharField(max_length=16, choices=_choices(DEPENDENCY_POLICIES), default="skip")
    state = models.CharField(max_length=16, choices=_choices(DEPENDENCY_STATES), default="waiting")
    reason = models.CharField(max_length=500, blank=True, default="")
    task = models.ForeignKey(
        "runtime.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "steward_dependency_trigger"
        constraints = [
            models.CheckConstraint(condition=Q(on_failure__in=DEPENDENCY_POLICIES), name="dependency_on_failure"),
            models.CheckConstraint(condition=Q(state__in=DEPENDENCY_STATES), name="dependency_state"),
        ]
        indexes = [models.Index(fields=["created_at"], condition=Q(state="waiting"), name="dependency_waiting")]

    def __str__(self):
        return f"dependency trigger {self.id} [{self.state}]"
