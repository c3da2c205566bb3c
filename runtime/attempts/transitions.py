"""How a running attempt ends: complete, fail, sleep, wait, block or yield.

Each is one conditional UPDATE (runtime/sql/attempt_end.sql) that moves the task, ends
the attempt, frees the slot and writes the audit row together, and reports whether it
won. Losing means a newer attempt or a stop got there first: the caller raises Fenced
and writes nothing else.

Lock order, everywhere: a parent's row before its child's. A child that reaches a
terminal status locks its parent first and then wakes it if it was the last child the
parent waits for; ctx.wait() checks its children while holding its own row lock. So a
wake-up cannot be lost between the two (tests/integration/test_children.py races them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from runtime import config, db, states
from runtime.attempts import dispatch
from runtime.attempts.lease import Lease
from runtime.errors import Fenced
from runtime.meter import meter


def end_attempt(
    lease: Lease,
    event: states.TaskEvent,
    *,
    output: str | None = None,
    error: dict | None = None,
    wake_at: datetime | None = None,
    waiting_on: list | None = None,
    note: str = "",
    audit: dict | None = None,
    blocked_decision=None,
    breaker: str | None = None,
) -> None:
    """Move the task from running by `event`, inside the caller's transaction if any.
    Into blocked (`block`, `deny`) it records why (states.BLOCKED_BY) and, for a denial,
    `blocked_decision` (the Decision's id), and for a breaker's trip `breaker` (its code).

    Raises Fenced if the attempt no longer owns the task.
    """
    target = states.target(event)
    params = {
        "task": lease.task_id,
        "epoch": lease.epoch,
        "target": target,
        "output": output,
        "error": json.dumps(error) if error is not None else None,
        "wake_at": wake_at,
        "waiting_on": waiting_on,
        "note": note[:500],
        "blocked_reason": states.BLOCKED_BY[event] if target == states.BLOCKED else None,
        "blocked_decision": str(blocked_decision) if blocked_decision is not None else None,
        "breaker": breaker,
        "next_reason": states.RETRY if event == states.TaskEvent.YIELD else states.RESUME,
        "terminal": target in states.TERMINAL,
        "end_reason": event,
        "event": event,
        "max_crashes": config.max_crashes(),
        "actor": lease.actor,
        # The event is not repeated: each ends in its own target, which the kind names
        # (a yield past MAX_CRASHES ends in task.dead, the only attempt end that does).
        # `task.blocked` says which kind of block it is (and so which act releases it).
        "data": json.dumps(
            {
                "epoch": lease.epoch,
                **({"blocked_reason": states.BLOCKED_BY[event]} if target == states.BLOCKED else {}),
                **(audit or {}),
            },
            default=str,
        ),
    }
    wakes_parent = target in states.TERMINAL and lease.parent_id is not None
    if not wakes_parent:
        _end(params, lease)
        return
    with transaction.atomic():
        db.execute("lock_task", {"task": lease.parent_id})
        _end(params, lease)
        wake_parent(parent_id=lease.parent_id, child_id=lease.task_id, actor=lease.actor)


@db.reads("attempt_end")
@dataclass(frozen=True, slots=True)
class _Ended:
    pool: str
    status: str  # where the task went


def _end(params: dict, lease: Lease) -> None:
    row = db.fetchone("attempt_end", params, row=_Ended)
    if row is None:
        raise Fenced(lease.task_id, lease.epoch, "status")
    if row.status == states.QUEUED:
        dispatch.pool_has_work(row.pool)
    if params["end_reason"] in (states.TaskEvent.COMPLETE, states.TaskEvent.FAIL):
        counted = "completed" if params["end_reason"] == states.TaskEvent.COMPLETE else "failed"
        db.after_commit(db.cursor(), lambda: meter.count(counted, tenant=lease.tenant))


@db.reads("wake_parent")
@dataclass(frozen=True, slots=True)
class _Woken:
    pool: str  # the parent's, queued again


def wake_parent(*, parent_id, child_id, actor: str) -> None:
    """Call with the parent's row lock held (lock_task.sql)."""
    row = db.fetchone("wake_parent", {"parent": parent_id, "child": str(child_id), "actor": actor}, row=_Woken)
    if row is not None:
        dispatch.pool_has_work(row.pool)


@db.reads("attempt_release")
@dataclass(frozen=True, slots=True)
class _Released:
    ended: int  # 1 when this call ended the attempt
    pool: str | None  # the pool whose slot it freed, if it held one


def release_stopped(*, task_id, epoch: int, end_reason: str, actor: str) -> bool:
    """A superseded attempt's worker has stopped running agent code: end the attempt
    and give its slot back, audited as `attempt.stopped`. Returns whether this call
    ended it."""
    released = db.fetchrow(
        "attempt_release",
        {"task": task_id, "epoch": epoch, "end_reason": end_reason, "actor": actor},
        row=_Released,
    )
    if released.pool is not None:
        dispatch.pool_has_work(released.pool)
    return bool(released.ended)


@db.reads("fence", "fence_update")
@dataclass(frozen=True, slots=True)
class _Fenced:
    tenant: str
    pool: str


def fence(lease: Lease, write: str, *, exclusive: bool = False) -> None:
    """First statement of a multi-statement write by an attempt (inside atomic())."""
    row = db.fetchone(
        "fence_update" if exclusive else "fence", {"task": lease.task_id, "epoch": lease.epoch}, row=_Fenced
    )
    if row is None:
        raise Fenced(lease.task_id, lease.epoch, write)
