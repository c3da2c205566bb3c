"""Audit seals: what the hash chains alone cannot show.

Each row links to the one before it in its chain, so an edited or removed row in the
middle breaks a link. But whoever can write the table can also delete a chain's newest
rows, or a whole task's chain, and leave every remaining link intact. A seal closes that:

1. The supervisor seals, for each tenant, the head (last chain_seq and its hash) of
   every chain that moved, into the tenant's seal chain (steward_audit_seal,
   append-only), every SEAL_SECONDS, and at once while its last seal was `behind`.
2. Each seal carries an HMAC-SHA256 over its content and the previous seal's MAC, with a
   key kept outside the database (STEWARD_AUDIT_SEAL_KEY): it cannot be forged or
   re-linked by someone who can only write the database.
3. Verify checks the seal chain (contiguous, each MAC right, each linked to the one
   before), that each seal's heads still hash to the root its MAC covers, and that every
   chain still holds the highest head a seal names; it names each chain whose sealed rows
   are missing or changed.

Bounded (docs/adr/0028-bounded-audit-seals.md, issue 20). A seal's row is a few hundred
bytes: its heads are rows of steward_audit_seal_head and the seal carries their Merkle
root and count. Making one reads at most 2 × SEAL_ROWS audit rows (audit_seal_heads.sql:
the settled rows after the last seal's position, and the fresh ones of the last two
leases) and writes at most as many heads, however many chains moved; a tenant further
behind than that is sealed again at the next look, as many times as the look's budget
allows. The check reads each tenant's latest sealed_at (audit_seal_due.sql) and nothing
else. Seals made before (version 1, their heads in one JSON object) still verify.

The limits: rows written after a tenant's latest seal are covered only by the next one,
and a table owner can delete the newest seals themselves (their MACs cannot be forged,
but they can be dropped). Export the seals (`steward audit seals`) to keep a copy
outside the database: a seal missing from the table but in the copy is then found too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction

from runtime import config, db
from runtime.models import AuditSeal, AuditSealHead

# The horizon of a seal's settled scan lies this many leases before its time: an
# event's `at` is its transaction's start, and no transaction outlives the server-side
# bounds of a lease (docs/adr/0012-bounded-stale-owners.md), so every row older than that
# is committed, or never will be, and a position behind it never needs reading again.
LOOKBACK_LEASES = 2
# Audit rows a seal reads in each of its two scans (settled, fresh): a seal names at most
# twice as many heads, and costs about the same beside a million tasks as beside none.
SEAL_ROWS = 20_000
# How long one supervisor's look may spend making seals (checking costs one statement):
# a tenant left behind is sealed again at the next look, its oldest-sealed first.
SEAL_BUDGET_SECONDS = 1.0
# Chains verify checks per statement (audit_seal_heads_check.sql).
CHECK_BATCH = 20_000
VERSION = 2
_BEGINNING = datetime(1, 1, 1, tzinfo=UTC)
_LAST_CHAIN = ""  # every chain name sorts after it


# The rows of this module's statements, read by name (runtime/db.py).
@db.reads("audit_seal_due")
@dataclass(frozen=True, slots=True)
class _Due:
    tenant: str  # a tenant whose trail moved since its latest seal, or is behind


@db.reads("audit_seal_latest")
@dataclass(frozen=True, slots=True)
class _Latest:
    seq: int
    mac: bytes
    sealed_at: datetime
    version: int
    through_at: datetime | None  # where the settled scan stopped (version 2)
    through_id: int | None


@db.reads("audit_seal_heads")
@dataclass(frozen=True, slots=True)
class _Moved:
    n: int  # settled rows scanned (the same on every row)
    at: datetime | None  # the last settled row's time and id: the next seal's position
    id: int | None
    chain: str | None  # a chain that moved, its highest row and hash (None: nothing moved)
    chain_seq: int | None
    hash: bytes | None


@db.reads("audit_sealed_heads_missing")
@dataclass(frozen=True, slots=True)
class _Unsealed:
    chain: str
    seq: int  # a row a version 1 seal recorded
    seal: int  # the newest seal that recorded it
    what: str  # missing (the row is gone) or changed (its hash is not the one sealed)


@db.reads("audit_seal_heads_check")
@dataclass(frozen=True, slots=True)
class _Checked:
    chain: str
    chain_seq: int  # a row a version 2 seal recorded
    seq: int  # that seal's seq
    what: str | None  # missing, changed, or None when the row is as sealed


@db.reads("audit_sealed_heads")
@dataclass(frozen=True, slots=True)
class _Sealed:
    chain: str
    seq: int  # the chain's newest row a version 1 seal recorded
    hash: bytes  # its hash as sealed


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


def audit_seal(*, every: float | None = None, budget: float | None = None) -> list[AuditSeal]:
    """Seal each tenant whose latest seal is older than `every` seconds (SEAL_SECONDS), or
    was left behind; returns the seals made.

    1. The check: one statement names the tenants due (audit_seal_due.sql), reading each
       one's latest sealed_at and nothing more.
    2. For each, oldest-sealed first, make one seal (seal_tenant). With a `budget` in
       seconds (the supervisor's look), go on sealing a tenant that is still behind, and
       stop making seals once the budget is spent: the rest wait for the next look.

    Safe to run from every supervisor at once: a seal takes the next seq of its tenant,
    unique per tenant, so of two supervisors sealing the same tenant one wins and the
    other's insert (and its heads) is refused and skipped.
    """
    every = config.audit_seal_seconds() if every is None else every
    began = time.monotonic()
    made = []
    for due in db.fetchall("audit_seal_due", {"every": every}, row=_Due):
        tenant = due.tenant
        while True:
            seal = seal_tenant(tenant)
            if seal is not None:
                made.append(seal)
            if budget is None or time.monotonic() - began >= budget:
                break
            if seal is None or not seal.behind:
                break
        if budget is not None and time.monotonic() - began >= budget:
            break
    return made


def audit_seal_now() -> list[AuditSeal]:
    """Seal every tenant now, each until it is no longer behind (`steward audit seal`):
    a trail never sealed is sealed in as many seals as it takes, each bounded."""
    made = audit_seal(every=0)
    behind = {seal.tenant for seal in made if seal.behind}
    while behind:
        more = [seal for seal in map(seal_tenant, sorted(behind)) if seal is not None]
        made += more
        behind = {seal.tenant for seal in more if seal.behind}
    return made


def seal_tenant(tenant: str) -> AuditSeal | None:
    """Make the tenant's next seal, or None when nothing moved (or another supervisor
    sealed it first).

    1. Read where the latest seal's scan got to (audit_seal_latest.sql): a version 1 seal
       covered every row older than its time less the lookback.
    2. Read the heads of the chains that moved (audit_seal_heads.sql): at most SEAL_ROWS
       settled rows after that position and SEAL_ROWS fresh ones, each chain's highest
       row unless a seal already names it or a later one.
    3. Nothing moved and no settled row read: no seal. Otherwise, in one transaction,
       insert the seal (next seq, its heads' Merkle root and count, the new position,
       the MAC over all of it and the previous MAC) and its heads.
    """
    key_id, key = config.audit_seal_keys()[0]
    now = db.clock()
    latest = db.fetchone("audit_seal_latest", {"tenant": tenant}, row=_Latest)
    seq, prev_mac, after_at, after_id = 1, b"", _BEGINNING, 0
    if latest is not None:
        seq, prev_mac = latest.seq + 1, bytes(latest.mac)
        if latest.version < VERSION:
            after_at = latest.sealed_at - _lookback()
        elif latest.through_at is not None and latest.through_id is not None:  # both or neither
            after_at, after_id = latest.through_at, latest.through_id
    rows = db.fetchall(
        "audit_seal_heads",
        {
            "tenant": tenant,
            "after_at": after_at,
            "after_id": after_id,
            "horizon": now - _lookback(),
            "rows": SEAL_ROWS,
        },
        row=_Moved,
        prepare=False,  # planned for its own range each time: a generic plan cannot see the LIMIT
    )
    scanned, last_at, last_id = rows[0].n, rows[0].at, rows[0].id
    heads = sorted(
        # A row that names a chain names its highest row and hash too (audit_seal_heads.sql).
        (
            (r.chain, r.chain_seq, bytes(r.hash))
            for r in rows
            if r.chain is not None and r.chain_seq is not None and r.hash is not None
        ),
        key=_order,
    )
    if not heads and not scanned:
        return None
    if scanned:
        through_at, through_id = last_at, last_id
    else:  # the settled scan stays where it was (a version 1 seal's position, made explicit)
        through_at, through_id = (after_at, after_id) if after_at != _BEGINNING else (None, None)
    seal = AuditSeal(
        tenant=tenant,
        seq=seq,
        sealed_at=now,
        version=VERSION,
        heads=None,
        root=merkle_root(heads),
        chains=len(heads),
        through_at=through_at,
        through_id=through_id,
        behind=scanned >= SEAL_ROWS,
        key_id=key_id,
        prev_mac=prev_mac,
    )
    seal.mac = _mac(key, seal)
    try:
        with transaction.atomic():
            seal.save(force_insert=True)
            db.execute(
                "audit_seal_head_insert",
                {
                    "seal": seal.id,
                    "tenant": tenant,
                    "chains": [h[0] for h in heads],
                    "seqs": [h[1] for h in heads],
                    "hashes": [h[2] for h in heads],
                },
                prepare=False,
            )
    except IntegrityError:
        return None  # another supervisor sealed this tenant first
    return seal


def seal_problems(*, tenant: str | None = None) -> list[SealProblem]:
    """What the seals show to be wrong, tenant by tenant (all tenants by default)."""
    keys = dict(config.audit_seal_keys())
    tenants = [tenant] if tenant else list(AuditSeal.objects.values_list("tenant", flat=True).distinct())
    problems = []
    for name in tenants:
        previous = None
        for seal in AuditSeal.objects.filter(tenant=name).order_by("seq").iterator(chunk_size=100):
            problems += _seal_chain_problems(name, seal, previous, keys)
            previous = seal
        for gone in db.fetchall("audit_sealed_heads_missing", {"tenant": name}, row=_Unsealed):
            problems.append(_head_problem(name, gone.chain, gone.seq, gone.seal, gone.what))
        after = _LAST_CHAIN
        while True:
            batch = db.fetchall(
                "audit_seal_heads_check",
                {"tenant": name, "after": after, "limit": CHECK_BATCH},
                row=_Checked,
                prepare=False,
            )
            problems += [_head_problem(name, h.chain, h.chain_seq, h.seq, h.what) for h in batch if h.what]
            if len(batch) < CHECK_BATCH:
                break
            after = batch[-1].chain
    return problems


def _seal_chain_problems(tenant: str, seal: AuditSeal, previous: AuditSeal | None, keys: dict) -> list[SealProblem]:
    problems = []
    expected_seq = previous.seq + 1 if previous is not None else 1
    if seal.seq != expected_seq:
        problems.append(
            SealProblem(tenant, "seal", f"seals #{expected_seq} to #{seal.seq - 1} are missing", seal=seal.seq)
        )
    if bytes(seal.prev_mac) != (bytes(previous.mac) if previous is not None else b""):
        problems.append(
            SealProblem(tenant, "seal", f"seal #{seal.seq} does not link to the seal before it", seal=seal.seq)
        )
    key = keys.get(seal.key_id)
    if key is None:
        problems.append(
            SealProblem(
                tenant,
                "seal",
                f"seal #{seal.seq} was made with key {seal.key_id}, "
                "which is not configured (STEWARD_AUDIT_SEAL_OLD_KEYS)",
                seal=seal.seq,
            )
        )
    elif not hmac.compare_digest(bytes(seal.mac), _mac(key, seal)):
        problems.append(
            SealProblem(
                tenant, "seal", f"seal #{seal.seq} is not authentic: its MAC does not match its content", seal=seal.seq
            )
        )
    elif seal.version >= VERSION:
        heads = seal_heads(seal)
        if len(heads) != seal.chains or not hmac.compare_digest(merkle_root(heads), bytes(seal.root)):
            problems.append(
                SealProblem(
                    tenant,
                    "seal",
                    f"seal #{seal.seq}'s chain heads no longer hash to its root "
                    f"({len(heads)} rows for {seal.chains} heads): a head was removed, added or changed",
                    seal=seal.seq,
                )
            )
    return problems


def _head_problem(tenant: str, chain: str, seq: int, seal_seq: int, what: str) -> SealProblem:
    detail = (
        f"row #{seq}, sealed by seal #{seal_seq}, is gone (its newest rows or the whole chain were deleted)"
        if what == "missing"
        else f"row #{seq} no longer has the hash seal #{seal_seq} recorded"
    )
    return SealProblem(tenant, what, detail, chain=chain, chain_seq=seq, seal=seal_seq)


def seal_heads(seal: AuditSeal) -> list[tuple[str, int, bytes]]:
    """A seal's chain heads, (chain, chain_seq, hash), in the order of its Merkle leaves."""
    if seal.version < VERSION:
        return sorted(((chain, n, bytes.fromhex(digest)) for chain, (n, digest) in seal.heads.items()), key=_order)
    rows = AuditSealHead.objects.filter(seal_id=seal.id).values_list("chain", "chain_seq", "hash")
    return sorted(((chain, n, bytes(digest)) for chain, n, digest in rows), key=_order)


def sealed_heads(*, tenants: list[str]) -> dict[str, tuple[int, bytes]]:
    """Each chain's highest sealed head (of either version), to verify only the rows
    written after it."""
    found = {
        head.chain: (head.seq, bytes(head.hash))
        for head in db.fetchall("audit_sealed_heads", {"tenants": tenants}, row=_Sealed)
    }
    for chain, seq, digest in (
        AuditSealHead.objects.filter(tenant__in=tenants).order_by("chain", "-chain_seq").distinct("chain")
    ).values_list("chain", "chain_seq", "hash"):
        if chain not in found or found[chain][0] < seq:
            found[chain] = (seq, bytes(digest))
    return found


def seal_export(seal: AuditSeal) -> dict:
    """A seal as JSON, for safekeeping outside the database: what its MAC covers. A
    version 2 seal's heads stay in the database; its root says whether they are intact."""
    common = {
        "tenant": seal.tenant,
        "seq": seal.seq,
        "sealed_at": seal.sealed_at.isoformat(),
        "version": seal.version,
        "key_id": seal.key_id,
        "prev_mac": bytes(seal.prev_mac).hex(),
        "mac": bytes(seal.mac).hex(),
    }
    if seal.version < VERSION:
        return {**common, "heads": seal.heads}
    return {
        **common,
        "root": bytes(seal.root).hex(),
        "chains": seal.chains,
        "through": [seal.through_at.isoformat(), seal.through_id] if seal.through_at else None,
    }


def merkle_root(heads: list[tuple[str, int, bytes]]) -> bytes:
    """The Merkle root over (chain, chain_seq, hash) leaves in the order given (by chain,
    bytewise): SHA-256, a leaf prefixed 0x00 and a node 0x01 (so no leaf can pass for a
    node), an odd node carried up as it is. A seal's MAC covers the root, so each of its
    heads can be proved with a path of log2(n) hashes, and verify finds a head row
    removed, added or changed by recomputing it."""
    level = [
        hashlib.sha256(b"\x00" + f"{chain}\x1f{seq}\x1f".encode() + digest).digest() for chain, seq, digest in heads
    ]
    if not level:
        return hashlib.sha256(b"").digest()
    while len(level) > 1:
        pairs = [hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def _order(head) -> bytes:
    return head[0].encode()


def _lookback() -> timedelta:
    return timedelta(seconds=LOOKBACK_LEASES * config.lease_seconds())


def _mac(key: bytes, seal: AuditSeal) -> bytes:
    body = {
        "tenant": seal.tenant,
        "seq": seal.seq,
        "sealed_at": _micros(seal.sealed_at),
        "prev_mac": bytes(seal.prev_mac).hex(),
        "key_id": seal.key_id,
    }
    if seal.version < VERSION:
        body["heads"] = seal.heads  # as version 1 MACs were made: its seals verify unchanged
    else:
        body.update(
            version=seal.version,
            root=bytes(seal.root).hex(),
            chains=seal.chains,
            through=[_micros(seal.through_at), seal.through_id] if seal.through_at else None,
            behind=seal.behind,
        )
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _micros(when: datetime) -> int:
    return round(when.timestamp() * 1_000_000)
