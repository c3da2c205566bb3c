"""AuditSeal: see runtime/trail/seals.py."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class AuditSeal(models.Model):
    """A tenant's seal of the audit chains that moved: each chain's head (chain_seq and
    hash) at sealing time, authenticated with an HMAC whose key is kept outside the
    database, and linked to the tenant's previous seal by that seal's MAC.

    Append-only like the trail (a trigger refuses UPDATE and DELETE). What a seal adds
    over the hash chains: whoever can rewrite the table can delete a chain's newest
    rows, or a whole chain, and leave every remaining link intact; a seal still names
    the head that must be there, and cannot be forged without the key.
    """

    tenant = models.CharField(max_length=100)
    seq = models.IntegerField()
    sealed_at = models.DateTimeField(db_default=Now())
    # {chain: [chain_seq, hash as hex]} for every chain that moved since the window start.
    heads = models.JSONField()
    key_id = models.CharField(max_length=16)
    prev_mac = models.BinaryField()
    mac = models.BinaryField()

    class Meta:
        db_table = "steward_audit_seal"
        constraints = [models.UniqueConstraint(fields=["tenant", "seq"], name="audit_seal_one_per_seq")]

    def __str__(self):
        return f"seal {self.tenant} #{self.seq} ({len(self.heads)} chains)"
