"""AuditBoundary and AuditArchive: see runtime/lifecycle/partitions.py and archive.py."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class AuditBoundary(models.Model):
    """Where a chain's live trail starts after older partitions were archived and dropped:
    the chain's last archived row (chain_seq and hash). Verify checks the chain's first
    live row against it instead of against nothing, and a sealed head at or below it is
    in an archive, not missing. Written by steward_partition_drop() in the transaction
    that drops the partition, from the partition's own rows (migration 0032)."""

    chain = models.CharField(max_length=120, primary_key=True)
    tenant = models.CharField(max_length=100)
    chain_seq = models.IntegerField()
    hash = models.BinaryField()
    partition = models.CharField(max_length=63, help_text="The dropped partition that held this row.")

    class Meta:
        db_table = "steward_audit_boundary"

    def __str__(self):
        return f"{self.chain} archived through #{self.chain_seq}"


class AuditArchive(models.Model):
    """One audit partition written out as JSON lines with its seals
    (runtime/lifecycle/archive.py). steward_partition_drop() drops an audit partition
    only once it has a row here: the trail is never dropped unarchived."""

    partition = models.CharField(max_length=63, unique=True)
    lower = models.DateTimeField(null=True)
    upper = models.DateTimeField()
    rows = models.BigIntegerField()
    sha256 = models.CharField(max_length=64, help_text="Of the archive file, as written.")
    path = models.CharField(max_length=1000)
    actor = models.CharField(max_length=200)
    archived_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "steward_audit_archive"

    def __str__(self):
        return f"{self.partition} ({self.rows} rows) -> {self.path}"
