"""WorkerCredential: see runtime/authz/credentials.py and docs/adr/0034-token-minting.md."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class WorkerCredential(models.Model):
    """A worker's own credential for the minting service (/gateway/tokens).

    Only the SHA-256 of its secret is kept: the secret is random (256 bits), shown once
    when made, and never stored, so a hash that cannot be slowed down is enough. A
    revoked credential mints nothing from its revocation on; each mint counts in `uses`
    and `last_used_at`, and writes its audit event (runtime/sql/token_issue.sql)."""

    id = models.CharField(primary_key=True, max_length=16)  # 16 hex digits, the public half
    name = models.CharField(max_length=100)  # who it was made for: "worker-a", "make-run"
    secret_hash = models.CharField(max_length=64)  # sha256 of the secret, hex
    created_at = models.DateTimeField(db_default=Now())
    created_by = models.CharField(max_length=200)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=200, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    uses = models.BigIntegerField(db_default=0)

    class Meta:
        db_table = "steward_worker_credential"

    def __str__(self):
        return f"worker credential {self.id} ({self.name}{', revoked' if self.revoked_at else ''})"
