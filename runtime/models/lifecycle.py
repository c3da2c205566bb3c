"""RetentionPolicy and ErasureReceipt: see runtime/lifecycle/ and docs/adr/0038-erasure-lifecycle.md."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now

from runtime.ids import uuid7


class RetentionPolicy(models.Model):
    """A tenant's retention periods, in days: after that long, the payloads of that kind
    (of finished tasks only) are erased by the daily retention job (tombstoned: the row
    and its hash stay). Null: kept until erased by subject. A tenant with no row keeps
    everything. `audit_days` is the audit trail's own period (archived, then dropped, by
    the audit archive), never shorter than any other: the trail outlives what it records."""

    tenant = models.CharField(max_length=100, unique=True)
    task_days = models.IntegerField(null=True, blank=True, help_text="Finished tasks' inputs, outputs, journal.")
    gateway_days = models.IntegerField(null=True, blank=True, help_text="Gateway calls' receipts and responses.")
    memory_days = models.IntegerField(null=True, blank=True, help_text="Agent memory records.")
    decision_days = models.IntegerField(null=True, blank=True, help_text="Authorization decisions.")
    audit_days = models.IntegerField(null=True, blank=True, help_text="The audit trail; >= every other period.")
    version = models.IntegerField(default=1)
    updated_by = models.CharField(max_length=200)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_retention_policy"
        constraints = [
            models.CheckConstraint(
                condition=(
                    (Q(task_days__isnull=True) | Q(task_days__gte=1))
                    & (Q(gateway_days__isnull=True) | Q(gateway_days__gte=1))
                    & (Q(memory_days__isnull=True) | Q(memory_days__gte=1))
                    & (Q(decision_days__isnull=True) | Q(decision_days__gte=1))
                    & (Q(audit_days__isnull=True) | Q(audit_days__gte=1))
                ),
                name="retention_days_positive",
            ),
            # The trail outlives what it records (null audit_days: kept for ever, the longest).
            models.CheckConstraint(
                condition=Q(audit_days__isnull=True)
                | (
                    Q(task_days__isnull=False, task_days__lte=F("audit_days"))
                    & (Q(gateway_days__isnull=False) & Q(gateway_days__lte=F("audit_days")))
                    & (Q(memory_days__isnull=False) & Q(memory_days__lte=F("audit_days")))
                    & (Q(decision_days__isnull=False) & Q(decision_days__lte=F("audit_days")))
                ),
                name="retention_audit_longest",
            ),
        ]

    def __str__(self):
        return f"retention of {self.tenant} (v{self.version})"


class ErasureReceipt(models.Model):
    """What one erasure by subject erased: per place (runtime/lifecycle/registry.py) the
    rows tombstoned and a sha256 over their hashes before, the Redis keys deleted and the
    exports removed. `body` is what the MAC covers (canonical JSON, keyed like the audit
    seals: STEWARD_AUDIT_SEAL_KEYS), so a changed receipt no longer verifies. Append-only."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    tenant = models.CharField(max_length=100)
    subject_kind = models.CharField(max_length=16)  # lifecycle.registry.SubjectKind
    subject = models.CharField(max_length=200)
    actor = models.CharField(max_length=200)
    reason = models.CharField(max_length=2000)
    created_at = models.DateTimeField(db_default=Now())
    rows = models.BigIntegerField(help_text="Rows tombstoned, over every place.")
    body = models.JSONField()
    key_id = models.CharField(max_length=16)
    mac = models.BinaryField()

    class Meta:
        db_table = "steward_erasure_receipt"
        indexes = [models.Index(fields=["tenant", "id"], name="erasure_receipt_tenant_id")]

    def __str__(self):
        return f"erasure {self.id} of {self.subject_kind} {self.subject}"
