"""AuditSeal and AuditSealHead: see runtime/trail/seals.py."""

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

    Two versions (docs/adr/0028-bounded-audit-seals.md). Version 1 (before migration
    0023) carries its heads in `heads`, one JSON object, and its MAC covers them: a seal
    over 100,000 chains was 9.7 MB, read whole by every check. Version 2 keeps its heads
    in AuditSealHead rows and carries their Merkle `root` and count, and the position its
    scan of the trail reached (`through_at`, `through_id`): a row of a few hundred bytes
    whatever moved, with at most 2 × SEAL_ROWS heads.
    """

    tenant = models.CharField(max_length=100)
    seq = models.IntegerField()
    sealed_at = models.DateTimeField(db_default=Now())
    version = models.SmallIntegerField(default=1)
    # Version 1: {chain: [chain_seq, hash as hex]} for every chain that moved since the window start.
    heads = models.JSONField(null=True, blank=True)
    # Version 2: the Merkle root over its heads (runtime/trail/seals.py merkle_root) and their count.
    root = models.BinaryField(null=True, blank=True)
    chains = models.IntegerField(null=True, blank=True)
    # Version 2: every audit row of the tenant up to this (at, id), in that order, is covered
    # by this seal or an earlier one (None: no settled row yet); `behind` when the scan
    # stopped at its bound with settled rows left, so the next look seals again at once.
    through_at = models.DateTimeField(null=True, blank=True)
    through_id = models.BigIntegerField(null=True, blank=True)
    behind = models.BooleanField(default=False)
    key_id = models.CharField(max_length=16)
    prev_mac = models.BinaryField()
    mac = models.BinaryField()

    class Meta:
        db_table = "steward_audit_seal"
        constraints = [models.UniqueConstraint(fields=["tenant", "seq"], name="audit_seal_one_per_seq")]

    def __str__(self):
        return f"seal {self.tenant} #{self.seq} ({self.chains if self.heads is None else len(self.heads)} chains)"


class AuditSealHead(models.Model):
    """One chain head a version 2 seal names: the chain's row `chain_seq` had `hash` when
    sealed. Append-only (the same trigger function as the seals). Verify recomputes each
    seal's Merkle root from its rows (a row removed, added or changed no longer matches
    the MAC'd root) and checks each chain's highest sealed head against the trail."""

    id = models.BigAutoField(primary_key=True)
    # DO_NOTHING: neither is ever deleted, and the database's triggers say so themselves.
    seal = models.ForeignKey(AuditSeal, on_delete=models.DO_NOTHING, related_name="+", db_index=False)
    tenant = models.CharField(max_length=100)
    chain = models.CharField(max_length=120)
    chain_seq = models.IntegerField()
    hash = models.BinaryField()

    class Meta:
        db_table = "steward_audit_seal_head"
        constraints = [models.UniqueConstraint(fields=["seal", "chain"], name="audit_seal_head_one_per_chain")]
        # A chain's highest sealed head, first: what a new seal skips as not moved (one
        # probe per candidate chain) and what verify checks, chain by chain in batches.
        indexes = [models.Index("tenant", "chain", models.F("chain_seq").desc(), name="audit_seal_head_chain")]

    def __str__(self):
        return f"{self.chain} #{self.chain_seq} (seal {self.seal_id})"
