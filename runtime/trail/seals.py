"""Audit seals: what the hash chains alone cannot show.

Each row links to the one before it in its chain, so an edited or removed row in the
middle breaks a link. But whoever can write the table can also delete a chain's newest
rows, or a whole task's chain, and leave every remaining link intact. A seal closes that:

1. Every SEAL_SECONDS the supervisor seals, for each tenant, the head (last chain_seq
   and its hash) of every chain that moved since the tenant's previous seal, into the
   tenant's seal chain (steward_audit_seal, append-only).
2. Each seal carries an HMAC-SHA256 over its content and the previous seal's MAC, with a
   key kept outside the database (STEWARD_AUDIT_SEAL_KEY): it cannot be forged or
   re-linked by someone who can only write the database.
3. Verify checks the seal chain (contiguous, each MAC right, each linked to the one
   before) and then that every chain still holds the head its latest seal names; it
   names each chain whose sealed rows are missing or changed.

The limits: rows written after a tenant's latest seal are covered only by the next one,
and a table owner can delete the newest seals themselves (their MACs cannot be forged,
but they can be dropped). Export the seals (`steward audit seals`) to keep a copy
outside the database: a seal missing from the table but in the copy is then found too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from runtime import config, db
from runtime.models import AuditSeal

# A seal's window reaches back this many leases before the previous seal: an event's
# `at` is its transaction's start, and no transaction outlives the server-side bounds
# of a lease (docs/adr/0012-bounded-stale-owners.md), so a late commit is still covered.
LOOKBACK_LEASES = 2


@dataclass(frozen=True)
class SealProblem:
    tenant: str
    problem: str  # "seal": the seal chain itself; "missing" / "changed": a sealed head
    detail: str
    chain: str = ""
    chain_seq: int | None = None
    seal: int | None = None

    def __str__(self):
        if self.problem == "seal":
            return f"seal chain of {self.tenant}: {self.detail}"
        return f"audit chain {self.chain} of {self.tenant}: {self.detail}"


@db.reads("audit_tenants")
@dataclass(frozen=True, slots=True)
class _Tenant:
    tenant: str


@db.reads("audit_seal_heads")
@dataclass(frozen=True, slots=True)
class _Head:
    chain: str
    chain_seq: int  # the chain's newest row
    hash: bytes  # and its hash


def audit_seal(*, every: float | None = None) -> list[AuditSeal]:
    """Seal each tenant whose latest seal is older than `every` seconds (SEAL_SECONDS).

    Safe to run from every supervisor at once: a seal takes the next seq of its tenant,
    unique per tenant, so of two supervisors sealing the same tenant one wins and the
    other's insert is refused and skipped.
    """
    every = config.audit_seal_seconds() if every is None else every
    key_id, key = config.audit_seal_keys()[0]
    made = []
    for tenant in [t.tenant for t in db.fetchall("audit_tenants", {}, row=_Tenant)]:
        now = db.clock()
        previous = AuditSeal.objects.filter(tenant=tenant).order_by("-seq").first()
        if previous is not None and previous.sealed_at > now - timedelta(seconds=every):
            continue
        since = (
            previous.sealed_at - timedelta(seconds=LOOKBACK_LEASES * config.lease_seconds())
            if previous is not None
            else datetime.min.replace(tzinfo=now.tzinfo)
        )
        heads = {
            head.chain: [head.chain_seq, bytes(head.hash).hex()]
            for head in db.fetchall("audit_seal_heads", {"tenant": tenant, "since": since}, row=_Head)
        }
        if previous is not None and not _moved(heads, previous.heads):
            continue
        seq = previous.seq + 1 if previous is not None else 1
        prev_mac = bytes(previous.mac) if previous is not None else b""
        mac = _mac(key, tenant=tenant, seq=seq, sealed_at=now, heads=heads, prev_mac=prev_mac, key_id=key_id)
        try:
            with transaction.atomic():
                made.append(
                    AuditSeal.objects.create(
                        tenant=tenant, seq=seq, sealed_at=now, heads=heads, key_id=key_id, prev_mac=prev_mac, mac=mac
                    )
                )
        except IntegrityError:
            continue  # another supervisor sealed this tenant first
    return made


@db.reads("audit_sealed_heads_missing")
@dataclass(frozen=True, slots=True)
class _Unsealed:
    chain: str
    seq: int  # a row a seal recorded
    seal: int  # the newest seal that recorded it
    what: str  # missing (the row is gone) or changed (its hash is not the one sealed)


@db.reads("audit_sealed_heads")
@dataclass(frozen=True, slots=True)
class _Sealed:
    chain: str
    seq: int  # the chain's newest sealed row
    hash: bytes  # its hash as sealed


def seal_problems(*, tenant: str | None = None) -> list[SealProblem]:
    """What the seals show to be wrong, tenant by tenant (all tenants by default)."""
    keys = dict(config.audit_seal_keys())
    tenants = [tenant] if tenant else list(AuditSeal.objects.values_list("tenant", flat=True).distinct())
    problems = []
    for name in tenants:
        previous = None
        for seal in AuditSeal.objects.filter(tenant=name).order_by("seq").iterator(chunk_size=100):
            expected_seq = previous.seq + 1 if previous is not None else 1
            if seal.seq != expected_seq:
                problems.append(
                    SealProblem(name, "seal", f"seals #{expected_seq} to #{seal.seq - 1} are missing", seal=seal.seq)
                )
            if bytes(seal.prev_mac) != (bytes(previous.mac) if previous is not None else b""):
                problems.append(
                    SealProblem(name, "seal", f"seal #{seal.seq} does not link to the seal before it", seal=seal.seq)
                )
            key = keys.get(seal.key_id)
            if key is None:
                problems.append(
                    SealProblem(
                        name,
                        "seal",
                        f"seal #{seal.seq} was made with key {seal.key_id}, "
                        "which is not configured (STEWARD_AUDIT_SEAL_OLD_KEYS)",
                        seal=seal.seq,
                    )
                )
            elif not hmac.compare_digest(
                bytes(seal.mac),
                _mac(
                    key,
                    tenant=name,
                    seq=seal.seq,
                    sealed_at=seal.sealed_at,
                    heads=seal.heads,
                    prev_mac=bytes(seal.prev_mac),
                    key_id=seal.key_id,
                ),
            ):
                problems.append(
                    SealProblem(
                        name,
                        "seal",
                        f"seal #{seal.seq} is not authentic: its MAC does not match its content",
                        seal=seal.seq,
                    )
                )
            previous = seal
        for gone in db.fetchall("audit_sealed_heads_missing", {"tenant": name}, row=_Unsealed):
            detail = (
                f"row #{gone.seq}, sealed by seal #{gone.seal}, is gone (its newest rows or the whole chain were deleted)"
                if gone.what == "missing"
                else f"row #{gone.seq} no longer has the hash seal #{gone.seal} recorded"
            )
            problems.append(SealProblem(name, gone.what, detail, chain=gone.chain, chain_seq=gone.seq, seal=gone.seal))
    return problems


def sealed_heads(*, tenants: list[str]) -> dict[str, tuple[int, bytes]]:
    """Each chain's latest sealed head, to verify only the rows written after it."""
    return {
        head.chain: (head.seq, bytes(head.hash))
        for head in db.fetchall("audit_sealed_heads", {"tenants": tenants}, row=_Sealed)
    }


def seal_export(seal: AuditSeal) -> dict:
    """A seal as JSON, for safekeeping outside the database."""
    return {
        "tenant": seal.tenant,
        "seq": seal.seq,
        "sealed_at": seal.sealed_at.isoformat(),
        "heads": seal.heads,
        "key_id": seal.key_id,
        "prev_mac": bytes(seal.prev_mac).hex(),
        "mac": bytes(seal.mac).hex(),
    }


def _moved(heads: dict, sealed: dict) -> bool:
    return any(sealed.get(chain) != head for chain, head in heads.items())


def _mac(key: bytes, *, tenant: str, seq: int, sealed_at: datetime, heads: dict, prev_mac: bytes, key_id: str) -> bytes:
    body = json.dumps(
        {
            "tenant": tenant,
            "seq": seq,
            "sealed_at": _micros(sealed_at),
            "heads": heads,
            "prev_mac": prev_mac.hex(),
            "key_id": key_id,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hmac.new(key, body.encode(), hashlib.sha256).digest()


def _micros(when: datetime) -> int:
    return round(when.timestamp() * 1_000_000)
