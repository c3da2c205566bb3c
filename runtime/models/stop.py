"""Stop, StopAck, AgentSwitch: see runtime/models/__init__.py for what the models share,
and runtime/stops/ for how a stop runs."""

from __future__ import annotations

from django.db import models
from django.db.models import Func, Q
from django.db.models.functions import Now

from runtime import states
from runtime.ids import uuid7
from runtime.models.choices import choices as _choices

STOP_OUTCOMES = tuple(states.StopOutcome)

# A stop's times are its transactions' time, now(): the instant its audit rows carry
# (the link trigger stamps now()) and its cancellations stamp (stop_settle.sql). Django's
# Now() is the statement's time instead, a few milliseconds later in the same
# transaction, and a stop settled in the transaction that requested it then read as
# finished before it was requested (issue 20: ...09.986 against ...09.989).
TRANSACTION_NOW = Func(function="now", output_field=models.DateTimeField())


class Stop(models.Model):
    """One operator's stop: of a task and its descendants (`task`), or of every live
    task of an agent in a tenant (`agent`, the kill switch). The tasks it covers point
    at it (Task.stop); it is over (`finished_at`) once all of them are cancelled."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    tenant = models.CharField(max_length=100)
    task = models.ForeignKey(
        "runtime.Task", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    agent = models.CharField(max_length=200, null=True, blank=True)
    actor = models.CharField(max_length=200)
    reason = models.CharField(max_length=2000)
    requested_at = models.DateTimeField(db_default=TRANSACTION_NOW)
    # Each level of the tree waits at most this long for its boundaries (leaves first).
    bound_seconds = models.FloatField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, null=True, blank=True, choices=_choices(STOP_OUTCOMES))

    class Meta:
        db_table = "steward_stop"
        constraints = [
            models.CheckConstraint(condition=Q(task__isnull=False) | Q(agent__isnull=False), name="stop_names_what"),
            models.CheckConstraint(condition=Q(bound_seconds__gt=0), name="stop_bound_positive"),
        ]
        indexes = [models.Index(fields=["tenant", "id"], name="stop_tenant_id")]

    def __str__(self):
        return f"stop {self.id} of {self.task_id or self.agent}"


class StopAck(models.Model):
    """One boundary's acknowledgment of one task's stop: what it did. Written only by
    Steward's own boundaries, never from a connection running agent code (migration
    0014's trigger), and never changed afterwards."""

    id = models.BigAutoField(primary_key=True)
    stop = models.ForeignKey(Stop, on_delete=models.PROTECT, related_name="acks", db_index=False)
    task = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="stop_acks", db_index=False)
    boundary = models.CharField(max_length=32, choices=_choices(states.STOP_BOUNDARIES))
    at = models.DateTimeField(db_default=TRANSACTION_NOW)  # never before the stop's requested_at
    by = models.CharField(max_length=200, help_text="The process or service that acknowledged.")
    detail = models.JSONField(default=dict)

    class Meta:
        db_table = "steward_stop_ack"
        constraints = [
            models.UniqueConstraint(fields=["stop", "task", "boundary"], name="stop_ack_once"),
            models.CheckConstraint(condition=Q(boundary__in=states.STOP_BOUNDARIES), name="stop_ack_boundary_known"),
        ]
        indexes = [models.Index(fields=["task", "stop"], name="stop_ack_task")]

    def __str__(self):
        return f"{self.boundary} acknowledged the stop of {self.task_id}"


class AgentSwitch(models.Model):
    """The agent kill switch: while `closed`, no task of `agent` is admitted in `tenant`
    (a submission, a child, a rerun: migration 0014's trigger on steward_task)."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.CharField(max_length=100)
    agent = models.CharField(max_length=200)
    closed = models.BooleanField()
    changed_by = models.CharField(max_length=200)
    changed_at = models.DateTimeField(db_default=Now())
    reason = models.CharField(max_length=2000)
    stop = models.ForeignKey(Stop, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False)

    class Meta:
        db_table = "steward_agent_switch"
        constraints = [models.UniqueConstraint(fields=["tenant", "agent"], name="agent_switch_one")]

    def __str__(self):
        return f"{self.agent} in {self.tenant}: {'closed' if self.closed else 'open'}"
