"""Decision: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime.ids import uuid7

# The places that enforce a contract (docs/contracts.md, Vocabulary).
BOUNDARIES = (
    "worker",
    "storage",
    "credential_gateway",
    "scheduler",
    "approval_gate",
    "grant_check",
    "tenant_isolation",
)


class Decision(models.Model):
    """One allow or deny by runtime.authz. Actor, owner, task, parent and epoch are
    separate fields, never folded into one another: the record says who acted (the
    agent), on whose authority (the owner), in which task and which of its attempts, and
    which parent's authority bounded it."""

    # Time-ordered (UUIDv7), so a page walks the primary key's order newest first.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    tenant = models.CharField(max_length=100)
    task = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="decisions", db_index=False)
    parent_task = models.UUIDField(null=True, blank=True)
    epoch = models.IntegerField()
    actor = models.CharField(max_length=200, help_text="The principal that acted: agent:<name>.")
    owner = models.CharField(max_length=200, help_text="On whose authority the task runs.")
    boundary = models.CharField(max_length=32)
    action = models.CharField(max_length=100)
    resource = models.CharField(max_length=500)
    allowed = models.BooleanField()
    reason_code = models.CharField(max_length=32)
    policy_version = models.CharField(max_length=32)
    authz_revision = models.BigIntegerField()
    at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_decision"
        constraints = [
            models.CheckConstraint(condition=Q(boundary__in=BOUNDARIES), name="decision_boundary_known"),
            models.CheckConstraint(condition=Q(epoch__gte=0), name="decision_epoch_non_negative"),
            models.CheckConstraint(condition=Q(authz_revision__gte=0), name="decision_revision_non_negative"),
        ]
        indexes = [
            models.Index(fields=["tenant", "id"], name="decision_tenant_id"),
            models.Index(fields=["task", "id"], name="decision_task_id"),
        ]

    def __str__(self):
        return f"{'allow' if self.allowed else 'deny'} {self.action} {self.resource} ({self.reason_code})"
