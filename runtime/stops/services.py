"""Starting, acknowledging and finishing stops; the agent kill switch; a new run of a
cancelled task. Each is a durable transaction of conditional writes, audited in it, and
none is callable from agent code (the stop's records refuse its connection)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from runtime import arguments, config, db, states
from runtime.attempts.transitions import wake_parent
from runtime.audit import AuditKind, audit_append, audit_append_many, with_via
from runtime.errors import InvalidTransition
from runtime.limits.pauses import tree_pauses_close
from runtime.models import AgentSwitch, Stop, StopAck, Task
from runtime.tasks.actions import Refusal, task_actions
from runtime.tasks.selectors import task_get
from runtime.tasks.services import insert_task

# What a boundary in PostgreSQL answers in the stop's own transaction, in its words.
STORAGE_FENCE = (
    "every write of an attempt of this task (step, child, timer, effect intent, status) "
    "is refused from the stop's commit on"
)


@dataclass
class StopStarted:
    """What a stop request did: the tasks it covers, those already cancelled (nothing of
    theirs was running), and those waiting for a boundary (stopping)."""

    stop_id: uuid.UUID
    tasks: list = field(default_factory=list)
    cancelled: list = field(default_factory=list)
    stopping: list = field(default_factory=list)


def task_stop(*, task_id, actor: str, reason: str, bound_seconds: float | None = None) -> StopStarted:
    """Stop a task and every live descendant.

    1. Lock the task's parent (if any), then the tree top-down (stop_tree.sql).
    2. Refuse (INVALID_TRANSITION) if nothing in it is live: it has finished, or is
       already stopping under an earlier stop (which the details name).
    3. Move every live task of the tree to `stopping` under one new Stop, with its
       deadline: the leaves' bound first, each level up one bound later.
    4. Acknowledge for the boundaries that live in PostgreSQL (storage, scheduler), and
       for the worker and the gateway where nothing of the task is running there.
    5. Cancel, leaf first, every task whose boundaries all acknowledged.
    """
    arguments.actor(actor)
    reason = _reason(reason)
    bound = _bound(bound_seconds)
    with transaction.atomic(durable=True):
        task = task_get(arguments.task_id(task_id))
        if task.parent_id:
            db.execute("lock_task", {"task": task.parent_id})
        rows = _lock_tree([task.id])
        if not rows:
            now = Task.objects.filter(id=task.id).values("status", "stop_id").get()
            raise InvalidTransition(
                f"task {task.id} is {now['status']}; only a live task can be stopped"
                + (" (it is already stopping: see its stop summary)" if now["status"] == states.STOPPING else ""),
                status=now["status"],
                **({"stop_id": str(now["stop_id"])} if now["stop_id"] else {}),
            )
        stop = Stop.objects.create(tenant=task.tenant, task_id=task.id, actor=actor, reason=reason, bound_seconds=bound)
        return _stop_rows(stop, rows, requested_on=task.id)


def agent_stop(*, tenant: str, agent: str, actor: str, reason: str, bound_seconds: float | None = None) -> StopStarted:
    """The kill switch: close submission for `agent` in `tenant` (no task of it is
    admitted until agent_reopen) and stop every live task of it, with its descendants,
    under one Stop. The switch's advisory lock is taken first, exclusively: a submission
    holds it shared while it inserts (migration 0014), so none slips between the close
    and the search for live tasks."""
    arguments.tenant(tenant)
    arguments.agent_name(agent)
    arguments.actor(actor)
    reason = _reason(reason)
    bound = _bound(bound_seconds)
    with transaction.atomic(durable=True):
        # Lock order, against the writers this waits for: the agent's live trees first,
        # each after its ancestors (a finishing child locks its parent's row, then its
        # own; a spawn holds its parent's row and then wants its pool's row), then every
        # pool row, the set of pools first (a submission holds its pool's row, perhaps
        # one it just created, and then wants the switch's lock: stop_pools_freeze.sql,
        # stop_pools_lock.sql), then the switch's lock. With the pools held no task can
        # be inserted anywhere, so the second look for live tasks finds every one.
        first = _live_roots(tenant, agent)
        for parent in sorted(
            set(Task.objects.filter(id__in=first, parent__isnull=False).values_list("parent_id", flat=True))
        ):
            db.fetchall("lock_ancestors", {"task": parent})
        _lock_tree(first)
        db.execute("stop_pools_freeze")
        db.execute("stop_pools_lock")
        db.execute("agent_switch_lock", {"tenant": tenant, "agent": agent})
        stop = Stop.objects.create(tenant=tenant, agent=agent, actor=actor, reason=reason, bound_seconds=bound)
        AgentSwitch.objects.update_or_create(
            tenant=tenant, agent=agent, defaults={"closed": True, "changed_by": actor, "reason": reason, "stop": stop}
        )
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.AGENT_STOPPED,
            data={"agent": agent, "stop": str(stop.id), "reason": reason},
        )
        roots = _live_roots(tenant, agent)
        if not roots:  # nothing to wait for: the stop is over as it starts
            Stop.objects.filter(id=stop.id).update(
                finished_at=F("requested_at"), outcome=states.StopOutcome.ACKNOWLEDGED
            )
            return StopStarted(stop_id=stop.id)
        rows = _lock_tree(roots)
        if rows:
            # A parent outside the stop waits for its stopped child: lock those first.
            inside = {row.id for row in rows}
            for parent in sorted({row.parent_id for row in rows if row.parent_id and row.parent_id not in inside}):
                db.execute("lock_task", {"task": parent})
        return _stop_rows(stop, rows, requested_on=None)


def _live_roots(tenant: str, agent: str) -> list:
    return list(
        Task.objects.filter(tenant=tenant, agent=agent, status__in=states.sources(states.TaskEvent.STOP)).values_list(
            "id", flat=True
        )
    )


@db.reads("stop_tree")
@dataclass(frozen=True, slots=True)
class _Stopping:
    """A live task of a stopped tree, locked, with what each boundary needs to know of it."""

    id: uuid.UUID
    parent_id: uuid.UUID | None
    status: str
    epoch: int
    wake_at: datetime | None  # its timer, if it sleeps
    waiting_on: int  # the children it waits for
    depth: int  # below the stop's root
    attempt_open: bool  # an attempt of it has not ended: the worker must answer
    calls: list[str]  # its gateway calls in flight: the gateway must answer


def _lock_tree(roots: list) -> list[_Stopping]:
    """stop_tree.sql, read again until it finds no task it had not already locked.

    Races a spawn: the statement reads the tree from its snapshot, taken before it
    waited for any row lock. A child whose spawn committed while the statement waited
    for the parent's row (the spawn's fence holds it FOR SHARE) is not in that
    snapshot, and would run on, uncovered, under a parent stopping for ever. Once a
    parent's row is locked here, no spawn under it can commit, so a second reading (a
    new snapshot) finds every child; it locks them, and a third finds the children of
    those that were spawning too. Usually two readings, the second finding nothing new.

    The reading returned is always one made after the locks were held, in a snapshot of
    its own: a statement keeps the snapshot it began with even after waiting for a lock,
    so the first reading would miss what the writers it waited for committed (an attempt
    just claimed, a gateway call just admitted, whose decision reads the task row FOR KEY
    SHARE: tests/console/gateway/test_gateway_stop.py races one), and acknowledge for the
    worker or the gateway with nothing in flight.
    """
    if not roots:
        return []
    params = {"roots": roots, "in_flight": config.gateway_timeout_seconds()}
    rows = db.fetchall("stop_tree", params, row=_Stopping)
    while rows:
        again = db.fetchall("stop_tree", params, row=_Stopping)
        if {row.id for row in again} == {row.id for row in rows}:
            return again
        rows = again
    return rows


def agent_reopen(*, tenant: str, agent: str, actor: str, reason: str = "") -> bool:
    """Open submission for an agent again. Returns whether it was closed (a conditional
    write: reopening an open agent changes nothing and says so)."""
    arguments.tenant(tenant)
    arguments.agent_name(agent)
    arguments.actor(actor)
    arguments.text("reason", reason)
    with transaction.atomic(durable=True):
        db.execute("agent_switch_lock", {"tenant": tenant, "agent": agent})
        won = AgentSwitch.objects.filter(tenant=tenant, agent=agent, closed=True).update(
            closed=False, changed_by=actor, reason=reason
        )
        if won:
            audit_append(
                actor=actor, tenant=tenant, kind=AuditKind.AGENT_REOPENED, data={"agent": agent, "reason": reason}
            )
        return bool(won)


def _stop_rows(stop: Stop, rows: list[_Stopping], *, requested_on) -> StopStarted:
    started = StopStarted(stop_id=stop.id)
    heights = _heights(rows)
    ids, deadlines = [row.id for row in rows], [stop.bound_seconds * (1 + heights[row.id]) for row in rows]
    db.execute(
        "stop_begin", {"ids": ids, "after": deadlines, "stop": stop.id, "note": f"stopping: {stop.reason}"[:500]}
    )
    acks, events = [], []
    for row in rows:
        task_id, status, epoch, calls = row.id, row.status, row.epoch, row.calls
        started.tasks.append(task_id)
        acks.append(
            StopAck(
                stop=stop,
                task_id=task_id,
                boundary=states.STORAGE,
                by="storage",
                detail={"fence": "closed", "epoch": epoch, "refuses": STORAGE_FENCE},
            )
        )
        acks.append(
            StopAck(
                stop=stop,
                task_id=task_id,
                boundary=states.SCHEDULER,
                by="scheduler",
                detail={
                    "was": status,
                    "timer_cancelled": row.wake_at.isoformat() if row.wake_at else None,
                    "queued_dropped": status == states.QUEUED,
                    "children_wait_cleared": row.waiting_on,
                    "messages": "a queued or late wake-up of this task finds nothing to claim",
                },
            )
        )
        if not row.attempt_open:
            acks.append(
                StopAck(
                    stop=stop,
                    task_id=task_id,
                    boundary=states.WORKER,
                    by="storage",
                    detail={"ended": "none running", "was": status},
                )
            )
        if not calls:
            acks.append(
                StopAck(
                    stop=stop,
                    task_id=task_id,
                    boundary=states.CREDENTIAL_GATEWAY,
                    by="storage",
                    detail={"in_flight": [], "tokens": "refused from the stop's commit on"},
                )
            )
        events.append(
            {
                "actor": stop.actor,
                "tenant": stop.tenant,
                "task_id": task_id,
                "kind": AuditKind.TASK_STOPPING,
                "data": {
                    "stop": str(stop.id),
                    "reason": stop.reason,
                    "was": status,
                    **({"requested_on": str(requested_on)} if requested_on else {"agent": stop.agent}),
                    **({"attempt_running": epoch} if row.attempt_open else {}),
                    **({"calls_in_flight": calls} if calls else {}),
                },
            }
        )
    # One statement for the tree's task.stopping rows, as one for its acknowledgments: a
    # round trip per task was most of a large stop's time on a busy machine (issue 20).
    audit_append_many(events)
    StopAck.objects.bulk_create(acks)
    # A paused tree the stop covers whole: its pause holds nothing any more (ADR 0021).
    tree_pauses_close(task_ids=ids, stop_id=stop.id, actor=stop.actor, reason=stop.reason)
    # Workers holding a lease of these tasks hear of it at once (runtime/worker/), not
    # at their next write; delivered at commit, so never for a stop that rolled back.
    db.execute("stop_notify", {"payload": str(stop.id)})
    # Leaves first: deepest rows first, so each parent is tried after its children. A
    # parent under this stop is stopping, never waiting: nothing to wake there.
    stopping = set(ids)
    for task_id in [row.id for row in sorted(rows, key=lambda r: -r.depth)]:
        if _settle_one(task_id, actor=stop.actor, due=False, stopping=stopping):  # the tree is locked already
            started.cancelled.append(task_id)
    started.stopping = [t for t in started.tasks if t not in started.cancelled]
    return started


def _heights(rows: list[_Stopping]) -> dict:
    """Each stopped task's height in the stopped tree (a leaf is 0): its deadline is
    (1 + height) bounds after the request, so a level waits for the one below it."""
    children: dict = {}
    for row in rows:
        children.setdefault(row.parent_id, []).append(row.id)
    heights: dict = {}
    for task_id in [row.id for row in sorted(rows, key=lambda r: -r.depth)]:
        heights[task_id] = 1 + max((heights[c] for c in children.get(task_id, ()) if c in heights), default=-1)
    return heights


@db.reads("stop_ack_insert")
@dataclass(frozen=True, slots=True)
class _Acked:
    id: int  # the acknowledgment made (none: the boundary had answered already)


def stop_ack(*, task_id, boundary: str, by: str, detail: dict, stop_id=None) -> bool:
    """Record `boundary`'s acknowledgment of the stop of `task_id` (its current stop
    unless `stop_id` names one), and cancel the task, and then its ancestors in the
    stop, if that was the last one they waited for. In the caller's transaction when
    there is one. Returns whether this acknowledgment was new (each boundary answers a
    task's stop once; a late one, after the bound cancelled the task, is still kept)."""
    if boundary not in states.STOP_BOUNDARIES:
        raise ValueError(f"unknown boundary {boundary!r}")
    with transaction.atomic():
        if stop_id is None:
            stop_id = Task.objects.filter(id=task_id).values_list("stop_id", flat=True).first()
            if stop_id is None:
                return False
        chain = lock_chain(task_id)
        made = db.fetchone(
            "stop_ack_insert",
            {
                "stop": stop_id,
                "task": task_id,
                "boundary": boundary,
                "by": by,
                "detail": json.dumps(detail, default=str),
            },
            row=_Acked,
        )
        if made is None:
            return False
        _settle_chain(chain, actor=by, due=False)
        return True


def stops_settle_due(*, actor: str, limit: int = 500) -> int:
    """The sweep's part (runtime/worker/supervisor.py): cancel stopping tasks whose bound
    passed, leaves first (their deadlines come first). Returns how many were cancelled."""
    due = list(
        Task.objects.filter(status=states.STOPPING, stop_deadline__lte=Now())
        .order_by("stop_deadline", "id")
        .values_list("id", flat=True)[:limit]
    )
    cancelled = 0
    for task_id in due:
        with transaction.atomic(durable=True):
            cancelled += _settle_chain(lock_chain(task_id), actor=actor, due=True)
    return cancelled


@db.reads("lock_ancestors")
@dataclass(frozen=True, slots=True)
class _Locked:
    id: uuid.UUID  # a task locked, from the task up to its root


def lock_chain(task_id) -> list:
    """Lock the task and its ancestors, root first (the order every writer locks a
    tree in); return their ids from the task up. A worker acknowledging its stop calls
    this before it ends its attempt (runtime/worker/executor.py, stop_watch.py): the
    attempt's end writes the task's audit chain, and a stop or the sweep holding the
    task's row while it appends to that chain would otherwise deadlock with it."""
    return [row.id for row in db.fetchall("lock_ancestors", {"task": task_id}, row=_Locked)]


def _settle_chain(chain: list, *, actor: str, due: bool) -> int:
    """Cancel the task (chain[0]) if its stop is done with it, then try its parent, and
    so on up: the last acknowledgment of a leaf may finish a whole branch. A parent
    outside the stop that waits for a cancelled task is woken (its lock is held)."""
    cancelled = 0
    for task_id in chain:
        if not _settle_one(task_id, actor=actor, due=due):
            break
        cancelled += 1
    return cancelled


@db.reads("stop_settle")
@dataclass(frozen=True, slots=True)
class _Settled:
    id: uuid.UUID  # the task cancelled
    parent_id: uuid.UUID | None
    stop_id: uuid.UUID
    acknowledged: bool  # every boundary answered (else its bound passed)
    stop_finished: int  # 1 when this ended the stop (no task of it is stopping any more)


def _settle_one(task_id, *, actor: str, due: bool, stopping: AbstractSet = frozenset()) -> bool:
    """stop_settle.sql for one task, whose parent's row lock the caller holds. Returns
    whether the task was cancelled; wakes its parent if that waits for it (a parent in
    `stopping`, moved to stopping in the caller's transaction, does not)."""
    row = db.fetchone(
        "stop_settle", {"task": task_id, "actor": actor, "due": due, "via": json.dumps(with_via({}))}, row=_Settled
    )
    if row is None:
        return False
    parent_id = row.parent_id
    if parent_id is not None and parent_id not in stopping:
        wake_parent(parent_id=parent_id, child_id=task_id, actor=actor)  # matches only a waiting parent
    return True


def task_rerun(*, task_id, actor: str, reason: str) -> uuid.UUID:
    """A deliberate new run of a cancelled task: a new task with a new id, the same
    agent, input, owner and pool, no caller key (the old key stays the old task's), and
    `rerun_of` naming the old one (which finds it through `reruns`). Nothing of the old
    run's journal or ledger carries over: its writes can never merge into this one."""

    arguments.actor(actor)
    reason = _reason(reason)
    with transaction.atomic(durable=True):
        old = task_get(arguments.task_id(task_id))
        db.execute("lock_task", {"task": old.id})
        old.refresh_from_db(fields=["status"])
        refusal = task_actions(old).rerun.refusal
        if refusal is Refusal.STATUS:
            raise InvalidTransition(
                f"task {old.id} is {old.status}; a new run is made from a cancelled task", status=old.status
            )
        if refusal is Refusal.CHILD:
            raise InvalidTransition(
                f"task {old.id} is a child of {old.parent_id}; a child runs again only with its parent",
                status=old.status,
            )
        made = insert_task(
            agent=old.agent,
            input_text=json.dumps(old.input),
            digest=old.input_digest,
            tenant=old.tenant,
            owner=old.owner,
            pool=old.pool_id,
            actor=actor,
        )
        Task.objects.filter(id=made.task_id).update(rerun_of=old.id)
        audit_append(
            actor=actor,
            tenant=old.tenant,
            task_id=old.id,
            kind=AuditKind.TASK_RERUN,
            data={"new_task": str(made.task_id), "reason": reason},
        )
        audit_append(
            actor=actor,
            tenant=old.tenant,
            task_id=made.task_id,
            kind=AuditKind.TASK_RERUN_OF,
            data={"old_task": str(old.id), "reason": reason},
        )
        return made.task_id


def _reason(reason) -> str:
    text = arguments.text("reason", reason, max_length=2000)
    if not text.strip():
        from runtime.errors import InvalidArgument

        raise InvalidArgument("a stop needs a reason: say why, for the audit trail", field="reason")
    return text


def _bound(bound_seconds) -> float:
    if bound_seconds is None:
        return config.stop_bound_seconds()
    return float(arguments.bounded("bound_seconds", bound_seconds, minimum=0.1, maximum=86_400, integer=False))
