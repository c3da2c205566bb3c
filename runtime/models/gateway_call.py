"""GatewayCall: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from runtime.ids import uuid7

# What became of a call the credential gateway took (runtime/gateway/services.py):
GATEWAY_OUTCOMES = (
    "admitted",  # authorized and forwarded; the provider has not answered yet
    "committed",  # the provider answered; receipt (and the untrusted output) recorded
    "partial",  # a stream cut short (authority changed, or a side went away): some output was delivered
    # An unkeyed call (no Idempotency-Key: the official `openai` client sends none) cut
    # short: what the provider did is not known, and nothing can ask it again by key.
    "unknown",
    "failed",  # the provider could not be reached or refused the call
    "denied",  # the decision denied it; nothing was forwarded
    "replayed",  # a committed call's key came again: its recorded output was returned, nothing forwarded
    "busy",  # its key's earlier send is still in flight: refused (CALL_IN_FLIGHT), nothing forwarded
)


class GatewayCall(models.Model):
    """One call through the credential gateway: the token's use (its jti, the route it
    was for) and the gateway's own record of the effect, linked to the task, its
    attempt and the journal step that made it. `response` is the provider's output as
    untrusted data ({"untrusted": true, ...}, held by a check): text that came from a
    model or a tool is never read as an instruction, a grant or an approval."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    tenant = models.CharField(max_length=100)
    task = models.ForeignKey("runtime.Task", on_delete=models.PROTECT, related_name="gateway_calls", db_index=False)
    attempt = models.ForeignKey(
        "runtime.Attempt", on_delete=models.PROTECT, related_name="gateway_calls", db_index=False, null=True
    )
    epoch = models.IntegerField()
    step_seq = models.IntegerField(null=True)
    jti = models.CharField(max_length=64)
    route = models.CharField(max_length=200, help_text="The token's audience: the gateway route it was for.")
    action = models.CharField(max_length=100)
    resource = models.CharField(max_length=500)
    # The caller's Idempotency-Key (the worker's effect key), or null for an unkeyed
    # call, which the gateway records and counts but cannot deduplicate.
    idempotency_key = models.CharField(max_length=255, null=True)
    decision = models.ForeignKey("runtime.Decision", on_delete=models.PROTECT, related_name="+", db_index=False)
    tokens = models.BigIntegerField(
        null=True, help_text="Model tokens the call used (prompt + completion), as counted at its finish."
    )
    outcome = models.CharField(max_length=16)
    status = models.IntegerField(null=True, help_text="The provider's HTTP status.")
    receipt = models.JSONField(null=True, help_text="The provider's response id and status; never a key.")
    response = models.JSONField(null=True)
    started_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True)
    # Tombstone (runtime/lifecycle/, docs/adr/0038-erasure-lifecycle.md): when its payload columns
    # were erased, by which erasure receipt or retention run, and the sha256 of what they held.
    erased_at = models.DateTimeField(null=True, blank=True)
    erased_by = models.CharField(max_length=64, null=True, blank=True)
    erased_hash = models.BinaryField(null=True, blank=True)

    class Meta:
        db_table = "steward_gateway_call"
        constraints = [
            models.CheckConstraint(condition=Q(outcome__in=GATEWAY_OUTCOMES), name="gateway_call_outcome_known"),
            models.CheckConstraint(
                condition=Q(response__isnull=True) | Q(response__untrusted=True), name="gateway_call_response_untrusted"
            ),
            # The gateway deduplicates by the worker's key: one committed call per key
            # and task; a key whose call was cut or refused may be sent again.
            models.UniqueConstraint(
                fields=["task", "idempotency_key"], condition=Q(outcome="committed"), name="gateway_call_committed_key"
            ),
        ]
        indexes = [
            models.Index(fields=["task", "id"], name="gateway_call_task_id"),
            models.Index(fields=["tenant", "id"], name="gateway_call_tenant_id"),
            # gateway_admit.sql asks whether this key's earlier send is still in flight
            # on every admission. Without this, that was a scan of all the task's calls
            # (gateway_call_task_id): 7.4 ms of an 8.4 ms admission for a task with 5,450
            # calls, growing with every call. Partial, so it holds only calls not yet
            # ended: small, and one index write per call (its UPDATE to an ending leaves
            # the entry to vacuum).
            models.Index(
                fields=["task", "idempotency_key"], condition=Q(outcome="admitted"), name="gateway_call_admitted_key"
            ),
        ]

    def __str__(self):
        return f"{self.route} {self.resource} [{self.outcome}]"
