"""Attempt: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from runtime import states
from runtime.models.choices import choices as _choices


class Attempt(models.Model):
    """One execution of a task by one worker. `epoch` is the fencing token."""

    # Indexed by the unique (task, epoch) constraint.
    task = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="attempts", db_index=False)
    epoch = models.IntegerField()
    worker = models.CharField(max_length=200)
    # The worker credential its worker claimed it under (WorkerCredential.id, not a key:
    # a credential's row may go while its attempts' rows stay). The minting service gives
    # this attempt's tokens to that credential alone (runtime/sql/token_issue.sql).
    credential = models.CharField(max_length=16, null=True, blank=True)
    reason = models.CharField(max_length=16, choices=_choices(states.ATTEMPT_REASONS))
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        db_table = "steward_attempt"
        constraints = [
            models.UniqueConstraint(fields=["task", "epoch"], name="attempt_one_per_epoch"),
            models.UniqueConstraint(
                fields=["task"], condition=Q(ended_at__isnull=True), name="attempt_one_live_per_task"
            ),
            models.CheckConstraint(condition=Q(epoch__gte=1), name="attempt_epoch_positive"),
        ]
        indexes = [
            models.Index(fields=["lease_expires_at"], condition=Q(ended_at__isnull=True), name="attempt_live_lease"),
        ]

    def __str__(self):
        return f"attempt {self.epoch} of {self.task_id} on {self.worker}"
