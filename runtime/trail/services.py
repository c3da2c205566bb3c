"""Verifying the audit trail: recompute every row's hash and link, in batches off the
chain index, and name the first row that was tampered with (docs/adr/0004-audit-chains.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models.functions import Now

from runtime import arguments, db
from runtime.audit import AuditKind, acting_through, audit_append
from runtime.models import AuditEvent
from runtime.trail.seals import SealProblem, audit_seal, audit_seal_now, seal_problems

__all__ = [
    "AuditKind",  # the web side names the kinds it records through audit_record
    "acting_through",
    "audit_record",
    "audit_record_once",
    "audit_verify",
    "audit_problems",
    "audit_check",
    "audit_seal",
    "audit_seal_now",
    "AuditCheck",
    "Tampered",
    "Progress",
]


def audit_record(*, actor: str, tenant: str, kind: AuditKind, data: dict | None = None, task_id=None) -> int:
    """Record an action that is not a runtime transition (an API token made or revoked,
    a person's role changed): on the caller's transaction when there is one, so the
    change and its event commit together, else in a transaction of its own."""
    arguments.actor(actor)
    arguments.tenant(tenant)
    with transaction.atomic():
        return audit_append(actor=actor, tenant=tenant, kind=kind, task_id=task_id, data=data)


def audit_record_once(
    *, actor: str, tenant: str, kind: AuditKind, about: str, within: timedelta, data: dict | None = None
) -> int | None:
    """Record an event about a condition that lasts (a sign-in lockout, asked about by every
    request it refuses) once per `within`: the new event's id, or None when the tenant's
    trail already holds one of this kind about the same thing (data["about"]) younger than
    that.

    1. Take a transaction-level advisory lock on (tenant, kind, about)
       (runtime/sql/audit_once_lock.sql): of many callers at once, one at a time checks.
    2. Look for such an event, in a statement of its own so that at READ COMMITTED it sees
       the one the caller we waited for committed.
    3. None: append it, on this transaction, and commit with the lock released.
    The look-up reads the tenant's events of the last `within` (index audit_tenant_at): for a
    quiet trail, such as the system tenant's, not for one a fleet of tasks writes into.
    """
    arguments.actor(actor)
    arguments.tenant(tenant)
    arguments.text("about", about, max_length=300)
    if not isinstance(within, timedelta) or within <= timedelta(0):
        raise TypeError("within must be a positive timedelta")
    with transaction.atomic():
        db.execute("audit_once_lock", {"key": f"{tenant}\n{kind}\n{about}"})
        recent = AuditEvent.objects.filter(tenant=tenant, kind=kind, at__gte=Now() - within, data__about=about)
        if recent.exists():
            return None
        return audit_append(actor=actor, tenant=tenant, kind=kind, data={**(data or {}), "about": about})


@dataclass(frozen=True)
class Tampered:
    id: int
    chain: str
    chain_seq: int
    problem: str  # "hash": the row's content changed; "link": a row before it changed
    #                or vanished; "gap": chain_seq skips (a row was removed)

    def __str__(self):
        reasons = {
            "hash": "its content no longer matches its hash",
            "link": "its prev_hash does not match the row before it in the chain",
            "gap": "the chain skips a sequence number (a row was removed)",
        }
        return f"audit row {self.id} ({self.chain} #{self.chain_seq}): {reasons[self.problem]}"


@dataclass(frozen=True)
class Progress:
    rows: int  # rows checked so far
    seconds: float  # since the verification began

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class AuditCheck:
    """What a verify found: the chains walked row by row, and the seals over them."""

    tenant: str | None
    rows: int
    seconds: float
    tampered: list[Tampered]
    seals: list[SealProblem]

    @property
    def ok(self) -> bool:
        return not self.tampered and not self.seals

    @property
    def first_bad(self) -> Tampered | None:
        return min(self.tampered, key=lambda bad: bad.id) if self.tampered else None


def audit_check(*, tenant: str | None = None, progress: Callable[[Progress], None] | None = None) -> AuditCheck:
    """The whole verdict on a tenant's trail (every tenant's by default), for the CLI,
    the API and the console alike:

    1. walk every chain of the tenant and recompute each row's hash and link
       (audit_problems): an edited, removed or re-linked row;
    2. check the tenant's seal chain and that every chain still holds the head its latest
       seal names (seal_problems): the newest rows of a chain, or a whole chain, deleted.
    Rows written after the latest seal are covered by step 1 only, until the next seal.
    """
    if tenant is not None:
        arguments.tenant(tenant)
    began, rows = time.monotonic(), [0]

    def heard(p: Progress) -> None:
        rows[0] = p.rows
        if progress is not None:
            progress(p)

    tampered = audit_problems(tenant=tenant, progress=heard)
    seals = seal_problems(tenant=tenant)
    return AuditCheck(tenant, rows[0], time.monotonic() - began, sorted(tampered, key=lambda bad: bad.id), seals)


BATCH_ROWS = 20_000
STREAMS = 2  # chain ranges verified at once, each on its own connection
LAST_SEQ = 2**31 - 1  # after (chain, LAST_SEQ) comes the next chain's first row


def audit_verify(
    *,
    after_id: int | None = None,
    starts: Mapping[str, tuple[int, bytes]] | None = None,
    progress: Callable[[Progress], None] | None = None,
    batch: int = BATCH_ROWS,
    streams: int = STREAMS,
    tenant: str | None = None,
) -> Tampered | None:
    """Recompute the trail's hashes and links; return the first bad row by id, or None.

    What is checked (see audit_problems): every chain from its first row (the default);
    or only the rows after audit id `after_id`, each linked to its predecessor; or only
    the chains in `starts`, each from a known-good (chain_seq, hash) on: a sealed head.
    """
    problems = audit_problems(
        after_id=after_id, starts=starts, progress=progress, batch=batch, streams=streams, tenant=tenant
    )
    return min(problems, key=lambda bad: bad.id) if problems else None


def audit_problems(
    *,
    after_id: int | None = None,
    starts: Mapping[str, tuple[int, bytes]] | None = None,
    progress: Callable[[Progress], None] | None = None,
    batch: int = BATCH_ROWS,
    streams: int = STREAMS,
    tenant: str | None = None,
) -> list[Tampered]:
    """Every bad row, found in batches of `batch` rows with no sort and no row held
    between batches; `progress` hears after each batch. With `tenant`, only that
    tenant's chains (the rows of others are read off the index but neither hashed nor
    reported: an operator of one tenant learns nothing of another's trail).

    1. By default, stream every chain in (chain, chain_seq) order off audit_chain_seq
       (runtime/sql/audit_verify_batch.sql), carrying each batch's last row into the
       next, so a chain that spans a boundary is linked across it. The chains are cut
       into `streams` ranges at sampled chain names, verified at once on their own
       connections: the hashing is PostgreSQL's CPU, one core per stream.
    2. With `starts`, stream each chain given from its (chain_seq, hash) on, the same way.
    3. With `after_id`, read the rows after it in id order and link each to its
       predecessor by index (runtime/sql/audit_verify_after.sql).
    """
    if after_id is not None and (starts is not None or tenant is not None):
        raise ValueError("verify after an id covers every tenant from that id on; not with starts or tenant")
    began = time.monotonic()
    checked, problems, lock = 0, [], threading.Lock()

    def tick(rows: int) -> None:
        nonlocal checked
        with lock:
            checked += rows
            if progress is not None:
                progress(Progress(checked, time.monotonic() - began))

    if after_id is not None:
        last_id = after_id
        while True:
            rows = _batch("audit_verify_after", {"after": last_id, "limit": batch}, _After)
            problems += [Tampered(r.id, r.chain, r.chain_seq, r.problem) for r in rows if r.problem]
            ends = [(r.id, r.n) for r in rows if r.last]
            if not ends:
                return problems
            last_id, n = ends[0]
            tick(n)
            if n < batch:
                return problems

    if starts is None:
        spans = _chain_ranges(streams)
    else:
        spans = [(chain, seq, bytes(head), chain) for chain, (seq, head) in sorted(starts.items())]

    def stream(span) -> list[Tampered]:
        chain, seq, head, last_chain = span
        found = []
        while True:
            rows = _batch(
                "audit_verify_batch",
                {"chain": chain, "seq": seq, "hash": head, "last_chain": last_chain, "limit": batch, "tenant": tenant},
                _Checked,
            )
            found += [Tampered(r.id, r.chain, r.chain_seq, r.problem) for r in rows if r.problem]
            ends = [(r.chain, r.chain_seq, bytes(r.hash), r.n) for r in rows if r.last]
            if not ends:
                return found
            chain, seq, head, n = ends[0]
            tick(n)
            if n < batch:
                return found

    if len(spans) < 2 or streams < 2:
        for span in spans:
            problems += stream(span)
        return problems
    with ThreadPoolExecutor(max_workers=streams, thread_name_prefix="audit-verify") as pool:
        for found in pool.map(_on_own_connection(stream), spans):
            problems += found
    return problems


def _chain_ranges(streams: int) -> list[tuple[str, int, bytes, str]]:
    """(after chain, after seq, that row's hash, last chain) for each stream: from the
    first chain to the last, cut at chain names sampled from the table. Ranges whose
    cuts coincide merge; an empty trail has none."""
    top = db.fetchrow("audit_last_chain", {}, row=_Top).chain
    if top is None:
        return []
    cuts = []
    if streams > 1:
        fractions = [i / streams for i in range(1, streams)]
        sampled = db.fetchrow("audit_chain_cuts", {"fractions": fractions}, row=_Cuts).cuts or []
        cuts = sorted({cut for cut in sampled if cut is not None and cut < top})
    bounds = ["", *cuts]
    return [
        (after, 0 if i == 0 else LAST_SEQ, b"", last)
        for i, (after, last) in enumerate(zip(bounds, [*cuts, top], strict=True))
    ]


def _on_own_connection(fn):
    def run(*args):
        try:
            return fn(*args)
        finally:
            connection.close()  # this thread's; back to the pool

    return run


@db.reads("audit_verify_batch")
@dataclass(frozen=True, slots=True)
class _Checked:
    """A row of a batch that is bad, or the batch's last (which the next batch starts after)."""

    id: int
    chain: str
    chain_seq: int
    hash: bytes
    problem: str | None
    last: bool
    n: int  # rows in the batch


@db.reads("audit_verify_after")
@dataclass(frozen=True, slots=True)
class _After:
    id: int
    chain: str
    chain_seq: int
    problem: str | None
    last: bool
    n: int


@db.reads("audit_last_chain")
@dataclass(frozen=True, slots=True)
class _Top:
    chain: str | None  # the greatest chain name; None: the trail is empty


@db.reads("audit_chain_cuts")
@dataclass(frozen=True, slots=True)
class _Cuts:
    cuts: list[str | None] | None  # chain names at the fractions asked for, from a sample


def _batch(name: str, params: dict, row: type) -> list:
    # Not a prepared statement: a generic plan cannot see the LIMIT, and on a large
    # trail it could choose to sort the whole table for every batch. Planning each
    # batch for its own parameters costs well under a millisecond.
    return db.fetchall(name, params, row=row, prepare=False)
