"""`ctx.memory`: an agent's memory, as journaled calls (runtime/worker/context.py holds
the handle and delegates here).

Each call is one journal step of kind `memory`, written in the same transaction as what
it did, fenced by the attempt's epoch:
- put(): the new version's row, its audit row and the journal row commit together, so a
  replay after a crash finds the journal row and returns the recorded outcome without
  writing again; a crash before the commit leaves neither, and the next attempt writes once.
- get(): the record read (and a lazy upgrade's new version, if the kind's schema moved
  on) is journaled, so a replay reads the same value whatever was written since. The
  journal row is `untrusted` when the record is (Step.untrusted), which an approval's
  taint summary counts.

Reads of a record written from model or tool text hand back its strings as
`UntrustedText` (runtime/taint.py), whose source names the record: quoted in an
approval's action they are listed in its taint summary, and offered as authority (an
effect's `requires`, a child's scope) they are refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from runtime import encoding, faults, states
from runtime.attempts import journal
from runtime.attempts.journal import JournalCall, Recorded, replay_or_run
from runtime.attempts.transitions import fence
from runtime.errors import InvalidArgument
from runtime.memory import services
from runtime.memory.kinds import MemoryKind, kind_get, record_key, upgraded, validated
from runtime.memory.selectors import latest, readable
from runtime.models import MemoryRecord
from runtime.taint import MEMORY_SOURCE, UntrustedText

RACE_ROUNDS = 5  # an unconditional put or a lazy upgrade re-reads this often when it loses a race
TTL_MAX = 100 * 365 * 86_400.0


@dataclass(frozen=True)
class Remembered:
    """A record as ctx.memory.get() returns it: the value (an instance of the kind's
    model, upgraded to its current schema) and where it came from."""

    kind: str
    key: str
    version: int
    value: Any  # the kind's pydantic model; its strings are UntrustedText when `untrusted`
    untrusted: bool  # written from a model's or a tool's text: data, never authority
    source: str  # states.MemorySource
    task: str | None  # provenance: the task, attempt (epoch) and step (seq) that wrote the content
    epoch: int | None
    seq: int | None
    actor: str  # who made this version (agent:<name>, or a person)
    valid_from: str
    valid_until: str | None


@dataclass(frozen=True)
class Written:
    """What ctx.memory.put() reports: whether this write's compare-and-set won, the
    version it made (None if it lost), and the record's current version after it."""

    won: bool
    version: int | None
    current: int


class AgentMemory:
    """The handle at ctx.memory. `call(name, run)` is the Context's: it takes the next
    seq (checked against the journal on replay) under the Context's guards."""

    def __init__(self, ctx, call: Callable[[str, Callable[[JournalCall], Any]], Any]):
        self._ctx = ctx
        self._call = call

    def get(self, kind: str, key: str) -> Remembered | None:
        """The record's current version if it is valid now (see runtime/memory/selectors.py),
        else None. A record below its kind's schema version is upgraded first, as a new
        version. Journaled: a replay returns what this read returned."""
        spec = kind_get(kind)
        record_key(key)
        return self._call(
            f"memory.get:{kind}/{key}",
            lambda call: replay_or_run(
                call,
                replay=lambda recorded: _remembered(spec, recorded.output),
                run=lambda c: _get(self._ctx, c, spec, key),
            ),
        )

    def put(
        self,
        kind: str,
        key: str,
        value,
        *,
        expected_version: int | None = None,
        source: str | None = None,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        ttl: float | None = None,
    ) -> Written:
        """Write the next version of the record. `expected_version`: a compare-and-set
        (0: the record must not exist yet); the answer says whether it won. None: write
        over whatever is current. `source`: agent (the default), model or tool; a value
        holding untrusted text (UntrustedText, a tool's {"untrusted": true} reply, or a
        string read from tainted memory) is recorded as model or tool text whatever
        `source` says. `valid_from`/`valid_until` (aware datetimes) or `ttl` (seconds
        from now on the database's clock): its validity window. Journaled: a replay
        returns the recorded answer and writes nothing."""
        spec = kind_get(kind)
        record_key(key)
        payload = validated(spec, value)
        chosen = _source(value, source)
        window = _window(valid_from, valid_until, ttl)
        if expected_version is not None and (
            isinstance(expected_version, bool)
            or not isinstance(expected_version, int)
            or not 0 <= expected_version < 2**31 - 1
        ):
            raise InvalidArgument(
                "expected_version is a version number, or 0 for a new record", field="expected_version"
            )
        return self._call(
            f"memory.put:{kind}/{key}",
            lambda call: replay_or_run(
                call,
                replay=_written,
                run=lambda c: _put(self._ctx, c, spec, key, payload, chosen, expected_version, window),
            ),
        )


def _source(value, declared) -> states.MemorySource:
    """The record's source: what the value holds decides taint; an agent may declare its
    own text model or tool text, never a person's, and never launder untrusted text."""
    if declared is not None and declared not in (states.MemorySource.AGENT, *states.UNTRUSTED_SOURCES):
        raise InvalidArgument("an agent writes memory as agent, model or tool", field="source")
    found = _untrusted_in(value)
    if found is not None:
        return found if declared in (None, states.MemorySource.AGENT) else states.MemorySource(declared)
    return states.MemorySource(declared or states.MemorySource.AGENT)


def _untrusted_in(value, depth: int = 0) -> states.MemorySource | None:
    """Model or tool if `value` holds untrusted text (a tool's reply counts as tool)."""
    if depth > 64:
        return None
    if isinstance(value, UntrustedText) or getattr(value, "untrusted", False) is True:
        receipt = getattr(value, "receipt", None)
        if isinstance(receipt, Mapping) and receipt.get("source") == states.MemorySource.TOOL:
            return states.MemorySource.TOOL
        return states.MemorySource.MODEL
    if isinstance(value, Mapping):
        if value.get("untrusted") is True:
            return states.MemorySource.TOOL
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif hasattr(type(value), "model_fields"):  # a pydantic model instance
        items = [getattr(value, name, None) for name in type(value).model_fields]
    else:
        return None
    found = [s for s in (_untrusted_in(i, depth + 1) for i in items) if s is not None]
    return states.MemorySource.TOOL if states.MemorySource.TOOL in found else (found[0] if found else None)


@dataclass(frozen=True)
class _Window:
    valid_from: datetime | None
    valid_until: datetime | None
    ttl: float | None


def _window(valid_from, valid_until, ttl) -> _Window:
    for name, value in (("valid_from", valid_from), ("valid_until", valid_until)):
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise InvalidArgument(f"{name} is an aware datetime", field=name)
    if ttl is not None:
        if valid_until is not None:
            raise InvalidArgument("give valid_until or ttl, not both", field="ttl")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= TTL_MAX:
            raise InvalidArgument(f"ttl is a number of seconds from 0 to {TTL_MAX:g}", field="ttl")
    if valid_from is not None and valid_until is not None and valid_until <= valid_from:
        raise InvalidArgument("valid_until comes after valid_from", field="valid_until")
    return _Window(valid_from, valid_until, None if ttl is None else float(ttl))


def _put(
    ctx, call: JournalCall, spec: MemoryKind, key: str, payload: dict, source, expected_version, window
) -> Written:
    lease = ctx.lease
    provenance = services.Provenance(source, f"agent:{ctx.agent}", ctx.task_id, ctx.epoch, call.seq)
    with transaction.atomic(durable=True):
        fence(lease, "memory")
        made = None
        current = 0
        for _ in range(1 if expected_version is not None else RACE_ROUNDS):
            now = latest(tenant=ctx.tenant, agent=ctx.agent, kind=spec.name, key=key)
            current = now.version if now is not None else 0
            made = services.insert(
                tenant=ctx.tenant,
                agent=ctx.agent,
                kind=spec.name,
                key=key,
                payload=payload,
                schema_version=spec.version,
                expected=current if expected_version is None else expected_version,
                change=states.MemoryChange.WRITE,
                provenance=provenance,
                valid_from=window.valid_from,
                valid_until=window.valid_until,
                ttl=window.ttl,
            )
            if made is not None:
                break
            # Lost to another writer of the same record (another task of this agent):
            # its version committed before our statement finished, so reading again sees it.
        if made is None:
            now = latest(tenant=ctx.tenant, agent=ctx.agent, kind=spec.name, key=key)
            current = now.version if now is not None else 0
        written = Written(made is not None, made.version if made else None, made.version if made else current)
        faults.reach(faults.BEFORE_STEP_JOURNAL, task_id=ctx.task_id, step=call.name, epoch=ctx.epoch)
        journal.write(
            lease,
            seq=call.seq,
            name=call.name,
            kind=states.StepKind.MEMORY,
            output=encoding.encode(written.__dict__, what="the memory write"),
        )
    faults.reach(faults.BETWEEN_STEPS, task_id=ctx.task_id, step=call.name, epoch=ctx.epoch)
    return written


def _written(recorded: Recorded) -> Written:
    return Written(**recorded.output)


def _get(ctx, call: JournalCall, spec: MemoryKind, key: str) -> Remembered | None:
    lease = ctx.lease
    with transaction.atomic(durable=True):
        fence(lease, "memory")
        record = None
        for _ in range(RACE_ROUNDS):
            record = readable(tenant=ctx.tenant, agent=ctx.agent, kind=spec.name, key=key)
            if record is None or record.payload is None or record.schema_version >= spec.version:
                break
            # Lazily upgraded, as a new version with the content's own provenance.
            made = services.upgrade_one(
                record,
                spec,
                provenance=services.Provenance(
                    states.MemorySource(record.source), f"agent:{ctx.agent}", record.task_id, record.epoch, record.seq
                ),
            )
            if made is not None:
                record = MemoryRecord.objects.get(id=made.id)
                break
        # An erased payload (retention, erasure) is a forgotten record: nothing to read.
        output = _recorded(record) if record is not None and record.payload is not None else None
        journal.write(
            lease,
            seq=call.seq,
            name=call.name,
            kind=states.StepKind.MEMORY,
            output=encoding.encode(output, what="the memory read"),
            untrusted=bool(output and output["untrusted"]),
        )
    faults.reach(faults.BETWEEN_STEPS, task_id=ctx.task_id, step=call.name, epoch=ctx.epoch)
    return _remembered(spec, json.loads(json.dumps(output)))


def _recorded(record: MemoryRecord) -> dict:
    return {
        "kind": record.kind,
        "key": record.key,
        "version": record.version,
        "schema_version": record.schema_version,
        "payload": record.payload,
        "untrusted": record.untrusted,
        "source": record.source,
        "task": str(record.task_id) if record.task_id else None,
        "epoch": record.epoch,
        "seq": record.seq,
        "actor": record.actor,
        "valid_from": record.valid_from.isoformat(),
        "valid_until": record.valid_until.isoformat() if record.valid_until else None,
    }


def _remembered(spec: MemoryKind, output: dict | None) -> Remembered | None:
    """The journaled read as the agent gets it: its payload carried (in memory only) to
    the kind's current schema if the code moved on since, validated into the model, and
    its strings marked untrusted if the record is."""
    if output is None:
        return None
    payload, schema_version = output["payload"], output["schema_version"]
    steps = upgraded(spec, payload, schema_version)
    if steps:
        payload = steps[-1][1]
    value = spec.model.model_validate(payload)
    if output["untrusted"]:
        where = f"{MEMORY_SOURCE}{output['kind']}/{output['key']}@v{output['version']}, written from {output['source']} text"
        receipt = {k: output[k] for k in ("kind", "key", "version", "source", "task", "epoch", "seq")}
        value = _tainted(value, where, receipt)
    return Remembered(
        kind=output["kind"],
        key=output["key"],
        version=output["version"],
        value=value,
        untrusted=output["untrusted"],
        source=output["source"],
        task=output["task"],
        epoch=output["epoch"],
        seq=output["seq"],
        actor=output["actor"],
        valid_from=output["valid_from"],
        valid_until=output["valid_until"],
    )


def _tainted(value, where: str, receipt: dict, depth: int = 0):
    """`value` with every string an UntrustedText naming the record it came from."""
    if depth > 64:
        return value
    if isinstance(value, str):
        return UntrustedText(value, source=where, receipt=receipt)
    if isinstance(value, list):
        return [_tainted(v, where, receipt, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_tainted(v, where, receipt, depth + 1) for v in value)
    if isinstance(value, dict):
        return {k: _tainted(v, where, receipt, depth + 1) for k, v in value.items()}
    if hasattr(type(value), "model_fields"):
        for name in type(value).model_fields:
            # Bypasses validation (and a frozen model's refusal): the value is the same text.
            object.__setattr__(value, name, _tainted(getattr(value, name), where, receipt, depth + 1))
    return value
