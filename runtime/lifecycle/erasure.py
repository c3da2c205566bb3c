"""Erasure by subject ("forget this"): preview, run, and the signed receipt
(docs/adr/0038-erasure-lifecycle.md, docs/state-machines.md "Payload lifecycle").

A subject (a task's tree, an owner, a tenant, an agent's memory) resolves to its tasks;
every place of the registry (runtime/lifecycle/registry.py) tombstones its rows of those
tasks, in bounded batches (a place with its own tenant and agent columns, memory, is
selected by them instead for a tenant or an agent subject), inside one transaction with the receipt and its audit row: an
erasure is all done or not at all. The preview counts the same rows with the same
statements' conditions, in the same order, so the number shown is the number recorded.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field

from django.db import transaction

from runtime import arguments, config, db, states
from runtime.audit import AuditKind, audit_append
from runtime.errors import ErasureSubjectLive, InvalidArgument, TaskNotFound
from runtime.ids import uuid7
from runtime.lifecycle import redis_places, statements
from runtime.lifecycle.registry import EXPORTS, SubjectKind, place, places_for
from runtime.models import ErasureReceipt, Task

# Tasks per tombstone statement: each UPDATE touches the rows of at most this many tasks.
BATCH_TASKS = 500
FINISHED = sorted(states.TERMINAL)


@dataclass(frozen=True)
class Subject:
    kind: SubjectKind
    tenant: str
    value: str  # the task id, the owner, the agent, or the tenant again

    @classmethod
    def of(cls, *, kind, tenant, value=None) -> Subject:
        """Parse and check a subject from any entry point (API, CLI, console)."""
        try:
            kind = SubjectKind(kind)
        except ValueError:
            raise InvalidArgument(
                f"a subject is one of {', '.join(SubjectKind)}, not {arguments.show(kind)}", field="kind"
            ) from None
        tenant = arguments.tenant(tenant)
        if kind == SubjectKind.TENANT:
            return cls(kind, tenant, tenant)
        if kind == SubjectKind.TASK:
            return cls(kind, tenant, str(arguments.task_id(value)))
        if kind == SubjectKind.OWNER:
            return cls(kind, tenant, arguments.actor(value, "owner"))
        return cls(kind, tenant, arguments.agent_name(value))


@dataclass
class Preview:
    """What an erasure of `subject` would erase now: rows per place, Redis keys, exports."""

    subject: Subject
    tasks: int
    places: dict[str, int] = field(default_factory=dict)
    redis: list[str] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(self.places.values())


def subject_tasks(subject: Subject) -> list[uuid.UUID]:
    """The subject's tasks, in id order. Refuses a task not in the tenant (404, like any
    other tenant's task) and a subject with unfinished tasks (ERASURE_SUBJECT_LIVE)."""
    base = Task.objects.filter(tenant=subject.tenant)
    if subject.kind == SubjectKind.TASK:
        top = base.filter(id=subject.value).values_list("root_id", flat=True).first()
        if top is None:
            raise TaskNotFound(f"no task {subject.value}", task_id=subject.value)
        # The tree below the named task: its root's family (one index, task_tree), then
        # down from the task through parent links, in memory.
        family = list(base.filter(root_id=top).values_list("id", "parent_id", "status"))
        below: dict = {}
        for tid, parent, _ in family:
            below.setdefault(parent, []).append(tid)
        status = {tid: st for tid, _, st in family}
        ids, todo = [], [uuid.UUID(subject.value)]
        while todo:
            tid = todo.pop()
            ids.append(tid)
            todo.extend(below.get(tid, ()))
        live = [t for t in ids if status[t] not in states.TERMINAL]
    elif subject.kind == SubjectKind.AGENT:
        # Agent memory is selected by (tenant, agent), not through tasks; a running task
        # of the agent reading it afterwards finds no record.
        return []
    else:
        rows = base if subject.kind == SubjectKind.TENANT else base.filter(owner=subject.value)
        pairs = list(rows.values_list("id", "status"))
        ids = [tid for tid, _ in pairs]
        live = [tid for tid, st in pairs if st not in states.TERMINAL]
    if live:
        raise ErasureSubjectLive(
            f"{len(live)} of the subject's tasks have not finished (e.g. {live[0]}): stop them, then erase",
            live=len(live),
            task_id=str(live[0]),
        )
    return sorted(ids)


def erasure_preview(*, subject: Subject) -> Preview:
    """What erasure_run would erase now, counted by the conditions its statements use."""
    tasks = subject_tasks(subject)
    preview = Preview(subject=subject, tasks=len(tasks))
    for where in places_for(subject.kind):
        preview.places[where.name] = sum(
            statements.run_count(where, tasks=batch, **_selecting(where, subject))
            for batch in _batches_for(where, subject, tasks)
        )
    preview.redis = redis_places.keys(subject)
    preview.exports = list(EXPORTS)
    return preview


def erasure_run(*, subject: Subject, actor: str, reason: str) -> ErasureReceipt:
    """Erase the subject's payloads from every place and return the signed receipt.

    1. Check the actor and the reason; resolve the subject's tasks (all finished).
    2. Per place, tombstone its rows of those tasks, BATCH_TASKS tasks per UPDATE, each
       returning the hashes of what it erased; the receipt keeps, per place, the count
       and a sha256 over those hashes (sorted, so any batching gives the same digest,
       and receipt_check recomputes it from the tombstones).
    3. Delete the subject's Redis keys (after commit: a rollback keeps them).
    4. Sign the receipt (HMAC, the audit seals' key), store it, and write
       erasure.completed on the tenant's chain: all in one transaction.
    Nothing is logged of what was erased; the receipt names places, counts and hashes.
    """
    arguments.actor(actor)
    reason = arguments.text("reason", reason)
    if not reason.strip():
        raise InvalidArgument("an erasure says why", field="reason")
    receipt_id = uuid7()
    by = f"erasure:{receipt_id}"
    with transaction.atomic(durable=True):
        tasks = subject_tasks(subject)
        places: list[dict] = []
        total = 0
        for where in places_for(subject.kind):
            found: list[bytes] = []
            for batch in _batches_for(where, subject, tasks):
                found.extend(statements.run_tombstone(where, tasks=batch, by=by, **_selecting(where, subject)))
            total += len(found)
            places.append(
                {
                    "place": where.name,
                    "table": where.table,
                    "columns": sorted(where.payload),
                    "kept_hash": where.kept_hash,
                    "rows": len(found),
                    "hashes": digest(found),
                }
            )
        keys = redis_places.keys(subject)
        body = {
            "receipt": str(receipt_id),
            "tenant": subject.tenant,
            "subject": {"kind": str(subject.kind), "value": subject.value},
            "actor": actor,
            "reason": reason,
            "at": db.clock().isoformat(),
            "tasks": len(tasks),
            "places": places,
            "redis": {"keys": keys},
            "exports": list(EXPORTS),
        }
        key_id, key = config.audit_seal_keys()[0]
        receipt = ErasureReceipt.objects.create(
            id=receipt_id,
            tenant=subject.tenant,
            subject_kind=subject.kind,
            subject=subject.value,
            actor=actor,
            reason=reason,
            rows=total,
            body=body,
            key_id=key_id,
            mac=sign(key, body),
        )
        audit_append(
            actor=actor,
            tenant=subject.tenant,
            kind=AuditKind.ERASURE_COMPLETED,
            data={
                "receipt": str(receipt_id),
                "subject_kind": str(subject.kind),
                "subject": subject.value,
                "rows": {p["place"]: p["rows"] for p in places},
                "redis_keys": len(keys),
                "why": reason,
            },
        )
        transaction.on_commit(lambda: redis_places.delete(keys))
    return receipt


def receipt_check(receipt: ErasureReceipt) -> list[str]:
    """What is wrong with a receipt: [] when its MAC verifies with a configured key and
    every place's hashes match the tombstones that name it."""
    keys = dict(config.audit_seal_keys())
    key = keys.get(receipt.key_id)
    if key is None:
        return [f"receipt {receipt.id} was signed with key {receipt.key_id}, which is not configured"]
    if not hmac.compare_digest(bytes(receipt.mac), sign(key, receipt.body)):
        return [f"receipt {receipt.id}: its signature does not match its content"]
    problems = []
    by = f"erasure:{receipt.id}"
    for entry in receipt.body.get("places", []):
        found = statements.run_hashes(place(entry["place"]), by=by)
        if len(found) != entry["rows"] or digest(found) != entry["hashes"]:
            problems.append(f"receipt {receipt.id}: {entry['place']}'s tombstones differ from the receipt")
    return problems


def sign(key: bytes, body: dict) -> bytes:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def digest(hashes: list[bytes]) -> str:
    return hashlib.sha256(b"".join(sorted(hashes))).hexdigest()


def _batches(tasks: list) -> list[list]:
    return [tasks[i : i + BATCH_TASKS] for i in range(0, len(tasks), BATCH_TASKS)]


def _batches_for(where, subject: Subject, tasks: list) -> list[list]:
    """The task batches a place's statement runs over: none but one (no tasks named) when
    the subject selects the place by its own columns (statements.by_tasks)."""
    return _batches(tasks) if statements.by_tasks(where, subject.kind) else [[]]


def _selecting(where, subject: Subject) -> dict:
    return {"kind": subject.kind, "tenant": subject.tenant, "agent": subject.value}
