"""AuditEvent: see runtime/models/__init__.py for what the models share."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Now


class AuditEvent(models.Model):
    """Append-only and hash-chained. Triggers (migrations 0002, 0006) fill chain_seq,
    prev_hash and hash on INSERT and refuse every UPDATE and DELETE.

    Each task has its own chain ("task:<id>"); events about no task chain per tenant.
    Per-chain hashing keeps the chain lock as narrow as the task row lock that every
    transition already holds (docs/adr/0004-audit-chains.md).
    """

    chain = models.CharField(max_length=120)
    chain_seq = models.IntegerField(db_default=0)
    at = models.DateTimeField(db_default=Now())  # the trigger sets it to now(), always
    actor = models.CharField(max_length=200)
    tenant = models.CharField(max_length=100)
    task_id = models.UUIDField(null=True, blank=True)
    kind = models.CharField(max_length=64)
    data = models.JSONField(default=dict)
    # sha256 as 32 raw bytes (migration 0006); the hash input carries prev_hash as hex.
    prev_hash = models.BinaryField(db_default=b"")
    hash = models.BinaryField(db_default=b"")

    class Meta:
        db_table = "steward_audit"
        constraints = [models.UniqueConstraint(fields=["chain", "chain_seq"], name="audit_chain_seq")]
        # A tenant's trail newest first, and a time range of it, off one index
        # (runtime/trail/selectors.py audit_page); a task's events are its chain, found
        # through audit_chain_seq.
        indexes = [
            models.Index(fields=["tenant", "at", "id"], name="audit_tenant_at"),
            # A grant's history (runtime/authz/selectors.py grant_events): grant events
            # only, by tenant and grant id. Partial, so it holds a few rows however long
            # the trail grows, and every other audit row costs it one failed LIKE.
            models.Index(
                "tenant",
                KeyTransform("grant", "data"),
                "id",
                name="audit_grant_events",
                condition=Q(kind__startswith="grant."),
            ),
        ]

    def __str__(self):
        return f"#{self.id} {self.kind} by {self.actor}"
