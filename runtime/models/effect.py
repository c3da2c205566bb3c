"""Effect: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime import states
from runtime.models.choices import choices as _choices


class Effect(models.Model):
    """The effect ledger: one row per external action, keyed by its idempotency key."""

    key = models.CharField(max_length=255, unique=True)
    task = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="effects", db_index=False)
    # The task's tenant, copied when the intent is recorded (a task never changes tenant):
    # the console's and the API's pages of a tenant's ledger read one index, no join.
    tenant = models.CharField(max_length=100)
    step_seq = models.IntegerField()
    name = models.CharField(max_length=200)
    effect_class = models.CharField(max_length=16, choices=_choices(states.EFFECT_CLASSES))
    keyed = models.BooleanField(help_text="Whether the target service deduplicates by our key.")
    state = models.CharField(max_length=16, choices=_choices(states.EFFECT_STATES))
    request_digest = models.CharField(max_length=64)
    receipt = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    attempt = models.ForeignKey("runtime.Attempt", on_delete=models.PROTECT, related_name="effects", db_index=False)
    epoch = models.IntegerField(help_text="Epoch of the attempt that last sent it.")
    sends = models.IntegerField(default=0, help_text="Times it was handed to the service.")
    # Its receipt came from outside (a model's or a tool's reply): see Step.untrusted.
    untrusted = models.BooleanField(db_default=False)
    resend_approved = models.BooleanField(default=False, help_text="An operator chose to send it again.")
    created_at = models.DateTimeField(db_default=Now())
    settled_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True, default="")
    resolution_note = models.TextField(blank=True, default="")
    # Tombstone (runtime/lifecycle/, docs/adr/0038-erasure-lifecycle.md): when its payload columns
    # were erased, by which erasure receipt or retention run, and the sha256 of what they held.
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_by = models.CharField(max_length=64, null=True, blank=True)
    erased_hash = models.BinaryField(null=True, blank=True)

    class Meta:
        db_table = "steward_effect"
        constraints = [
            models.CheckConstraint(condition=Q(state__in=states.EFFECT_STATES), name="effect_state_known"),
            models.CheckConstraint(condition=Q(effect_class__in=states.EFFECT_CLASSES), name="effect_class_known"),
            models.UniqueConstraint(fields=["task", "step_seq"], name="effect_one_per_step"),
        ]
        # The ledger's pages (runtime/effects/selectors.py effect_page): by state newest first;
        # a task's effects come from effect_one_per_step. The key's unique index is its
        # only one (migration 0005 dropped Django's varchar_pattern_ops twin: nothing
        # matches keys by prefix), and `attempt` has none (nothing looks effects up by
        # attempt, and attempts are never deleted): two fewer index writes per change.
        indexes = [
            models.Index(fields=["state", "id"], name="effect_state_id"),
            models.Index(fields=["tenant", "id"], name="effect_tenant_id"),
            models.Index(fields=["tenant", "state", "id"], name="effect_tenant_state_id"),
        ]

    def __str__(self):
        return f"{self.name} [{self.state}] {self.key}"
