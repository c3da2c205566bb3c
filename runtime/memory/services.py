"""Writing agent memory: a new version per change, each a compare-and-set
(runtime/sql/memory_insert.sql) with its audit row in the same transaction.

The agent's own writes go through the journal (runtime/memory/agent.py, which calls
`insert` inside its fenced transaction); a person's write, an upgrade and a rollback are
the services below, `transaction.atomic(durable=True)` each, with `actor=`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from runtime import arguments, db, encoding, states
from runtime.audit import AuditKind, audit_append
from runtime.errors import InvalidArgument, MemoryConflict, MemoryPayloadErased
from runtime.memory.kinds import MemoryKind, kind_get, kinds, record_key, upgraded, validated
from runtime.memory.selectors import current_only, effects_since, latest, version_get
from runtime.models import Effect, MemoryRecord

REASON_MAX = 500
AGENT_MAX = 200  # steward_memory_record.agent, as an agent's name (runtime/agents.py)
UPGRADE_BATCH = 500  # records `memory_upgrade_all` reads per round


@db.reads("memory_insert")
@dataclass(frozen=True, slots=True)
class Inserted:
    id: int
    version: int


@dataclass(frozen=True)
class Provenance:
    """Where a version's content came from and who wrote it (MemoryRecord's columns)."""

    source: states.MemorySource
    actor: str
    task_id: object = None
    epoch: int | None = None
    seq: int | None = None

    @property
    def untrusted(self) -> bool:
        return self.source in states.UNTRUSTED_SOURCES


def insert(
    *,
    tenant: str,
    agent: str,
    kind: str,
    key: str,
    payload: dict,
    schema_version: int,
    expected: int,
    change: states.MemoryChange,
    provenance: Provenance,
    from_version: int | None = None,
    reason: str = "",
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    ttl: float | None = None,
    audit: dict | None = None,
) -> Inserted | None:
    """Insert version `expected + 1` and its audit row, on the caller's transaction; None
    if another writer got there first (or `expected` is not the current version). The
    audit row names the record and its payload's hash, never the payload: an erasure
    must find it in one column (docs/adr/0039-agent-memory.md). `audit`: more for its data."""
    payload_hash = encoding.digest(payload)
    row = db.fetchone(
        "memory_insert",
        {
            "tenant": tenant,
            "agent": agent,
            "kind": kind,
            "key": key,
            "expected": expected,
            "schema_version": schema_version,
            "payload": encoding.encode(payload, what="the memory value"),
            "payload_hash": payload_hash,
            "change": str(change),
            "source": str(provenance.source),
            "untrusted": provenance.untrusted,
            "task": provenance.task_id,
            "epoch": provenance.epoch,
            "seq": provenance.seq,
            "actor": provenance.actor,
            "from_version": from_version,
            "reason": reason,
            "valid_from": valid_from,
            "valid_until": valid_until,
            "ttl": ttl,
        },
        row=Inserted,
    )
    if row is None:
        return None
    kinds = {
        states.MemoryChange.WRITE: AuditKind.MEMORY_WRITTEN,
        states.MemoryChange.UPGRADE: AuditKind.MEMORY_UPGRADED,
        states.MemoryChange.ROLLBACK: AuditKind.MEMORY_ROLLED_BACK,
    }
    audit_append(
        actor=provenance.actor,
        tenant=tenant,
        kind=kinds[change],
        task_id=provenance.task_id,
        data={
            "agent": agent,
            "kind": kind,
            "key": key,
            "version": row.version,
            "schema_version": schema_version,
            "payload_hash": payload_hash,
            "source": str(provenance.source),
            "untrusted": provenance.untrusted,
            "epoch": provenance.epoch,
            "seq": provenance.seq,
            "from_version": from_version,
            "reason": reason,
            **(audit or {}),
        },
    )
    return row


def _reason(reason: str) -> str:
    if not isinstance(reason, str) or len(reason) > REASON_MAX or "\x00" in reason:
        raise InvalidArgument(f"a reason is at most {REASON_MAX} characters of text", field="reason")
    return reason


def memory_put(
    *,
    tenant: str,
    agent: str,
    kind: str,
    key: str,
    value,
    actor: str,
    expected_version: int | None = None,
    valid_until: datetime | None = None,
    reason: str = "",
) -> Inserted | None:
    """A person writes a record (source `person`: trusted).

    1. Check the kind, the key and the value against the kind's model.
    2. Insert the next version, conditional on `expected_version` (None: on whatever is
       current), with its audit row, in one transaction. Returns None when the
       compare-and-set lost: another writer's version is current."""
    spec = kind_get(kind)
    payload = validated(spec, value)
    tenant, actor = arguments.tenant(tenant), arguments.actor(actor)
    arguments.identifier("agent", agent, max_length=AGENT_MAX)
    record_key(key)
    with transaction.atomic(durable=True):
        expected = expected_version
        if expected is None:
            now = latest(tenant=tenant, agent=agent, kind=kind, key=key)
            expected = now.version if now is not None else 0
        return insert(
            tenant=tenant,
            agent=agent,
            kind=kind,
            key=key,
            payload=payload,
            schema_version=spec.version,
            expected=expected,
            change=states.MemoryChange.WRITE,
            provenance=Provenance(states.MemorySource.PERSON, actor),
            reason=_reason(reason),
            valid_until=valid_until,
        )


@dataclass(frozen=True)
class Rollback:
    """What memory_rollback did: the new current version, and the effects that happened
    (or may have) since the restored version was written, which a rollback cannot undo."""

    record: MemoryRecord
    restored: MemoryRecord
    effects: list[Effect]


def memory_rollback(*, tenant: str, agent: str, kind: str, key: str, version: int, actor: str, reason: str) -> Rollback:
    """Make `version` of a record current again, as a new version.

    1. Read the version to restore (MEMORY_RECORD_NOT_FOUND; MEMORY_PAYLOAD_ERASED if
       retention erased it) and the current one.
    2. Insert the next version with the restored payload, schema version, validity window
       and provenance (a rollback by a person does not launder a model's text: a tainted
       version stays tainted), `change` rollback, `from_version` the restored one;
       conditional on the current version (MEMORY_CONFLICT if a writer got there first).
    3. List the agent's effects in this tenant whose intent was recorded since the restored
       version was written and that happened or may have (committed, partial, unknown):
       the audit row records their ids, and the caller shows them. Nothing undoes them.
    All in one transaction."""
    reason, actor = _reason(reason), arguments.actor(actor)
    arguments.identifier("agent", agent, max_length=AGENT_MAX)
    with transaction.atomic(durable=True):
        restored = version_get(tenant=tenant, agent=agent, kind=kind, key=key, version=version)
        if restored.payload is None:
            raise MemoryPayloadErased(
                f"version {version} of {kind}/{key} was erased: only its hash remains", version=version
            )
        current = latest(tenant=tenant, agent=agent, kind=kind, key=key)
        assert current is not None  # the restored version exists
        since = effects_since(tenant=tenant, agent=agent, since=restored.created_at)
        made = insert(
            tenant=tenant,
            agent=agent,
            kind=kind,
            key=key,
            payload=restored.payload,
            schema_version=restored.schema_version,
            expected=current.version,
            change=states.MemoryChange.ROLLBACK,
            provenance=Provenance(
                states.MemorySource(restored.source), actor, restored.task_id, restored.epoch, restored.seq
            ),
            from_version=restored.version,
            reason=reason,
            valid_from=restored.valid_from,
            valid_until=restored.valid_until,
            audit={"effects_since": [e.id for e in since], "effects_since_count": len(since)},
        )
        if made is None:
            # Another writer (an agent's put, an upgrade) committed a version after our read.
            raise MemoryConflict(f"{kind}/{key} changed while rolling back: read it again", kind=kind, key=key)
        record = MemoryRecord.objects.get(id=made.id)
    return Rollback(record, restored, since)


def upgrade_one(record: MemoryRecord, spec: MemoryKind, *, provenance: Provenance) -> Inserted | None:
    """Carry `record` (the current version) to its kind's current schema version as the
    next version, on the caller's transaction; None if a writer got there first. The
    content's source and taint are the record's: an upgrade is a function of it."""
    steps = upgraded(spec, record.payload, record.schema_version)
    if not steps:
        return None
    schema_version, payload = steps[-1]
    return insert(
        tenant=record.tenant,
        agent=record.agent,
        kind=record.kind,
        key=record.key,
        payload=payload,
        schema_version=schema_version,
        expected=record.version,
        change=states.MemoryChange.UPGRADE,
        provenance=provenance,
        from_version=record.version,
        reason=f"schema v{record.schema_version} -> v{schema_version}",
        valid_from=record.valid_from,
        valid_until=record.valid_until,
    )


@dataclass(frozen=True)
class UpgradeReport:
    upgraded: int  # records carried to their kind's current version
    lost: int  # records another writer changed meanwhile (the next run finds them)
    erased: int  # current versions whose payload was erased: nothing to carry


def memory_upgrade_all(
    *, actor: str, tenant: str | None = None, agent: str | None = None, kind: str | None = None
) -> UpgradeReport:
    """Upgrade every current record below its kind's schema version (`steward memory
    upgrade`): for each kind declared here, read the stale current versions in batches
    and upgrade each in its own transaction with its audit row (one record's conflict
    loses only that record)."""
    actor = arguments.actor(actor)
    done = lost = erased = 0
    specs = [kind_get(kind)] if kind is not None else kinds()
    for spec in specs:
        after = 0
        while True:
            batch = _stale(spec, tenant=tenant, agent=agent, after=after)
            if not batch:
                break
            after = batch[-1].id
            for record in batch:
                if record.payload is None:
                    erased += 1
                    continue
                with transaction.atomic(durable=True):
                    made = upgrade_one(
                        record,
                        spec,
                        provenance=Provenance(
                            states.MemorySource(record.source), actor, record.task_id, record.epoch, record.seq
                        ),
                    )
                done, lost = (done + 1, lost) if made is not None else (done, lost + 1)
    return UpgradeReport(done, lost, erased)


def _stale(spec: MemoryKind, *, tenant, agent, after: int) -> list[MemoryRecord]:
    """Current versions of `spec` below its schema version, by id, past `after`."""
    rows = current_only(MemoryRecord.objects.filter(kind=spec.name, schema_version__lt=spec.version, id__gt=after))
    if tenant is not None:
        rows = rows.filter(tenant=tenant)
    if agent is not None:
        rows = rows.filter(agent=agent)
    return list(rows.order_by("id")[:UPGRADE_BATCH])
