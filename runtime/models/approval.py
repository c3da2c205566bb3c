"""Approval: see runtime/models/__init__.py for what the models share, and
runtime/approvals/ for how a package is requested, decided and re-checked."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime import states
from runtime.ids import uuid7
from runtime.models.choices import choices as _choices


class Approval(models.Model):
    """One approval package: what an agent asks a person to approve, and what the
    approval is bound to. Everything below `state` is written once, by the request; the
    executor recomputes `action_hash` and `context_digest` before it acts on an
    approval, and a difference makes the package `stale` (docs/adr/0017-approvals.md)."""

    # Time-ordered (UUIDv7): the inbox's "newest first" walks the primary key.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    tenant = models.CharField(max_length=100)
    task = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="approvals", db_index=False)
    seq = models.IntegerField(help_text="The step seq of the request in the task's journal.")
    part = models.IntegerField(default=0, help_text="Which of the request's approvals (ctx.request_approvals).")
    name = models.CharField(max_length=200)
    # The requester: the agent that asked, and the person on whose authority its task runs.
    agent = models.CharField(max_length=200)
    owner = models.CharField(max_length=200)
    action = models.JSONField(help_text="The canonical action (encoding.encode), as approved.")
    action_hash = models.CharField(max_length=64, help_text="sha256 of the canonical action.")
    effect_class = models.CharField(max_length=16, choices=_choices(states.EFFECT_CLASSES))
    # What the context digest covered, in the clear, and its sha256: the task's input
    # digest, the precondition the agent's callback read (an ETag, a version), the
    # policy_version and the tenant's authz_revision at the request.
    context = models.JSONField()
    context_digest = models.CharField(max_length=64)
    # The taint summary: whether the action holds text that came from a model's or a
    # tool's reply (UntrustedText, {"untrusted": true}), and where in the action.
    untrusted = models.BooleanField()
    untrusted_paths = models.JSONField(default=list)
    # Coarser and sound where the above is not: text the agent derived from a reply (sliced,
    # formatted) is plain str again, so also count what the task had read before asking.
    untrusted_steps = models.IntegerField(
        default=0, help_text="The task's journaled steps before the request whose output came from a model or a tool."
    )
    requested_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField()
    state = models.CharField(max_length=16, choices=_choices(states.APPROVAL_STATES), default=states.PENDING)
    decided_by = models.CharField(max_length=200, null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.CharField(max_length=2000, blank=True, default="")
    # Why the executor found it stale: which of hash, digest or authority changed.
    stale_reason = models.CharField(max_length=500, blank=True, default="")
    checked_at = models.DateTimeField(null=True, blank=True)
    # Tombstone (runtime/lifecycle/, docs/adr/0038-erasure-lifecycle.md): when its payload columns
    # were erased, by which erasure receipt or retention run, and the sha256 of what they held.
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_by = models.CharField(max_length=64, null=True, blank=True)
    erased_hash = models.BinaryField(null=True, blank=True)

    class Meta:
        db_table = "steward_approval"
        constraints = [
            models.UniqueConstraint(fields=["task", "seq", "part"], name="approval_one_per_part"),
            models.CheckConstraint(condition=Q(state__in=states.APPROVAL_STATES), name="approval_state_known"),
            models.CheckConstraint(
                condition=Q(effect_class__in=states.EFFECT_CLASSES), name="approval_effect_class_known"
            ),
            models.CheckConstraint(
                condition=Q(state=states.PENDING) | Q(decided_at__isnull=False), name="approval_decided_says_when"
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "id"], name="approval_tenant_id"),
            # The inbox and the sweep: pending ones by expiry. Small: decided rows leave it.
            models.Index(fields=["expires_at"], name="approval_pending_expiry", condition=Q(state=states.PENDING)),
        ]

    def __str__(self):
        return f"approval {self.id} of {self.task_id}#{self.seq} ({self.state})"
