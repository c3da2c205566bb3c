"""Children: ctx.spawn() and ctx.wait() (runtime/worker/context.py).

A child is a task in its own right (same tenant and owner, its own id, attempts and
audit chain), linked to its parent by parent_id, root_id and the parent's spawn seq.
Lock order, as everywhere: a parent's row before its child's (runtime/attempts/transitions.py).
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from dataclasses import dataclass

from django.db import transaction

from runtime import agents, db, encoding, faults, states
from runtime.attempts import journal
from runtime.attempts.journal import JournalCall, Recorded, replay_or_run
from runtime.attempts.lease import Lease
from runtime.attempts.transitions import end_attempt, fence
from runtime.errors import BreakerTripped, NotJournalable, SpawnRefused, StewardError, Suspend
from runtime.limits import breakers
from runtime.limits.services import default_pool_name
from runtime.tasks.services import insert_task, validate_input


@dataclass(frozen=True)
class ChildResult:
    task_id: str
    status: str
    output: object
    error: dict | None

    @property
    def ok(self) -> bool:
        return self.status == states.COMPLETED


def spawn(
    lease: Lease,
    call: JournalCall,
    *,
    agent: str,
    input: dict,
    owner: str,
    root_id,
    limits: dict[str, int] | None = None,
    requested_scope: list[dict] | None = None,
) -> uuid.UUID:
    """Create the child and journal its id in one fenced transaction, or journal why it
    was refused (SpawnRefused, replayed the same way). `requested_scope` (checked by the
    caller, runtime/worker/authority.py) is stored on the child in that transaction:
    runtime.authz reads it on every check of the child and its descendants.

    A spawn past a fan-out breaker (`limits`, runtime/limits/breakers.py; None: the
    task's own, read in the transaction) raises
    BreakerTripped and journals nothing: the task is blocked for an operator, and the
    spawn asks again when it is resumed."""
    return replay_or_run(
        call,
        replay=_spawned,
        run=functools.partial(
            _spawn,
            lease,
            agent=agent,
            input=input,
            owner=owner,
            root_id=root_id,
            limits=limits,
            requested_scope=requested_scope,
        ),
    )


def _spawned(recorded: Recorded) -> uuid.UUID:
    if recorded.error:
        raise SpawnRefused(recorded.name, recorded.error["type"], recorded.error["message"])
    return uuid.UUID(recorded.output["task_id"])


def _spawn(
    lease: Lease,
    call: JournalCall,
    *,
    agent: str,
    input: dict,
    owner: str,
    root_id,
    limits: dict[str, int] | None,
    requested_scope: list[dict] | None,
) -> uuid.UUID:
    seq, name = call.seq, call.name
    faults.reach(faults.BEFORE_SPAWN, task_id=lease.task_id, step=name, epoch=lease.epoch)
    started = time.monotonic()
    try:
        spec = agents.get(agent)
        input_text, digest = validate_input(spec, input)
        with transaction.atomic(durable=True):
            fence(lease, "child")
            breakers.spawn_admit(lease, root_id=root_id, limits=limits or breakers.limits_of(lease.task_id))
            child = insert_task(
                agent=agent,
                input_text=input_text,
                digest=digest,
                tenant=lease.tenant,
                owner=owner,
                pool=spec.pool or default_pool_name(),
                actor=f"task:{lease.task_id}",
                parent_id=lease.task_id,
                root_id=root_id,
                spawn_seq=seq,
                requested_scope=requested_scope,
            ).task_id
            journal.write(
                lease,
                seq=seq,
                name=name,
                kind=states.StepKind.SPAWN,
                output=json.dumps({"task_id": str(child)}),
                started=started,
            )
        return child
    except BreakerTripped:
        raise  # nothing journaled: the executor blocks the task, a resume asks again
    except StewardError as exc:
        journal.write(
            lease,
            seq=seq,
            name=name,
            kind=states.StepKind.SPAWN,
            error={"type": exc.code, "message": exc.message},
            started=started,
        )
        raise SpawnRefused(name, exc.code, exc.message) from exc


@db.reads("children_results")
@dataclass(frozen=True, slots=True)
class _Child:
    id: uuid.UUID
    status: str
    output: str | None  # jsonb, as text on this connection
    error: str | None


def wait(lease: Lease, call: JournalCall, children) -> list[ChildResult]:
    """Every child's result once all are terminal, in the order given; until then the
    attempt ends `waiting` (Suspend) and holds no worker and no slot."""
    ids = [uuid.UUID(str(child)) for child in children]
    return replay_or_run(
        call,
        replay=lambda recorded: [ChildResult(**item) for item in recorded.output],
        run=lambda call: _wait(lease, call, ids),
    )


def _wait(lease: Lease, call: JournalCall, ids: list[uuid.UUID]) -> list[ChildResult]:
    seq = call.seq
    with transaction.atomic(durable=True):
        # Exclusive: a finishing child locks this row before it looks at us, so it
        # either sees us waiting or we see it finished (runtime/attempts/transitions.py).
        fence(lease, "status", exclusive=True)
        found = {
            child.id: (child.status, encoding.decode(child.output), encoding.decode(child.error))
            for child in db.fetchall("children_results", {"ids": ids, "parent": lease.task_id}, row=_Child)
        }
        strangers = [str(i) for i in ids if i not in found]
        if strangers:  # NotJournalable: agent code must not carry on past a used seq
            raise NotJournalable(f"ctx.wait() takes this task's children only; not children: {strangers}")
        pending = [i for i in dict.fromkeys(ids) if found[i][0] not in states.TERMINAL]
        if pending:
            end_attempt(
                lease,
                states.TaskEvent.WAIT,
                waiting_on=pending,
                note=f"waiting for {len(pending)} of {len(ids)} children",
            )
        else:
            results = [ChildResult(str(i), *found[i]) for i in ids]
            journal.write(
                lease, seq=seq, name="wait", kind=states.StepKind.WAIT, output=json.dumps([r.__dict__ for r in results])
            )
            return results
    raise Suspend("wait")
