"""Tree pauses: a fan-out breaker that trips pauses the whole tree for an operator.

A tree that grows too wide, too deep or too fast is one runaway, not one task's: its
siblings are as likely to keep growing it as the task whose spawn was refused. So a
fan-out trip (states.FANOUT_BREAKERS) pauses every task of the tree; a runaway trip
(steps, wall clock) blocks its own task only (docs/adr/0021-tree-pauses.md).

1. **Pausing** (tree_pause, from the executor once a spawn was refused), in one
   transaction:
   a. lock the tree's rows, parents first (tree_lock.sql): this waits for the spawns
      already under way, which hold their spawner's row;
   b. take the tree's spawn lock (spawn_lock.sql): once this transaction commits, every
      spawn of the tree finds the pause (spawn_breakers.sql) and is refused;
   c. open the pause (tree_pause_open.sql), or join the one already open;
   d. hold the idle tasks (tree_hold.sql): queued, sleeping and waiting become blocked
      (`tree_paused`), each audited; they hold no slot, timer or worker;
   e. notify the workers on the stop channel (delivered at commit);
   f. and the executor ends the tripping attempt `trip` in the same transaction (its
      breaker on its row, the pause in its `error` and `task.blocked`).
2. **Running tasks** finish the step they are in (a pause is not a stop: nothing is
   interrupted) and end `pause` before their next new step. They learn of it from the
   notification (the stop watcher), from their lease's next renewal, and, for an
   attempt that starts during the pause, from the first new step's read of its limits.
   A spawn is refused in the database under the lock, so none gets past a pause however
   late a worker learns of it.
3. **Lifting** (tree_release, from task_resume: resuming any task of a paused tree), in
   the resume's transaction: lock the tree as in 1a, close the pause and queue again
   every task it holds, each audited. The tripped task itself is resumed like any
   tripped task, usually with a raised limit; resumed without one, it trips again and
   pauses the tree again, visibly.
4. **Stopping** the tree (tree_pauses_close, from the stop's transaction): once every
   task of the tree is stopping or finished, the pause has nothing left to hold and is
   closed, audited with the stop it came from. A stop of a subtree leaves it open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from runtime import db
from runtime.attempts import dispatch
from runtime.audit import with_via
from runtime.errors import BreakerTripped, TreePaused
from runtime.models import TreePause


@db.reads("tree_pause_open")
@dataclass(frozen=True, slots=True)
class _Opened:
    id: int  # the tree's open pause
    opened: bool  # made by this statement (else another trip's, joined)


@db.reads("tree_hold")
@dataclass(frozen=True, slots=True)
class _Held:
    held: int  # idle tasks of the tree the pause blocked now


def tree_pause(lease, *, root_id, tripped: BreakerTripped) -> dict:
    """Pause `root_id`'s tree because `tripped` (a fan-out breaker) refused a spawn of the
    lease's task; return what the tripped attempt's end records of it (pause_id,
    tree_held, tree_paused: opened or joined). Call inside the transaction that then ends
    that attempt `trip` (runtime/worker/executor.py _trip): if that end is fenced, the
    pause rolls back with it, and the task's next attempt replays the spawn and trips again."""
    tree_lock(root_id)
    db.execute("spawn_lock", {"root": str(root_id)})
    pause = db.fetchrow(
        "tree_pause_open",
        {
            "root": root_id,
            "tenant": lease.tenant,
            "task": lease.task_id,
            "breaker": tripped.breaker,
            "limit": tripped.limit,
            "observed": int(tripped.observed),
        },
        row=_Opened,
    )
    held = db.fetchrow(
        "tree_hold",
        {
            "root": root_id,
            "task": str(lease.task_id),
            "pause": pause.id,
            "breaker": tripped.breaker,
            "actor": lease.actor,
            "note": f"tree paused: breaker {tripped.breaker} tripped at task {lease.task_id}",
        },
        row=_Held,
    ).held
    db.execute("stop_notify", {"payload": f"pause:{pause.id}"})  # delivered at commit
    return {"pause_id": pause.id, "tree_held": held, "tree_paused": "opened" if pause.opened else "joined"}


def tree_lock(root_id) -> None:
    """Lock the tree's rows, parents first (tree_lock.sql). Inside a transaction."""
    db.fetchall("tree_lock", {"root": root_id})


@dataclass(frozen=True)
class Released:
    pause_id: int
    queued: int  # the other tasks of the tree the release queued again


@db.reads("tree_release")
@dataclass(frozen=True, slots=True)
class _Freed:
    pause_id: int  # the pause lifted
    pool: str | None  # a pool of the tasks it queued again (None: it queued none)
    queued: int  # how many of that pool


@db.reads("pause_lifted")
@dataclass(frozen=True, slots=True)
class _Requeued:
    pool: str


def tree_release(*, root_id, task_id, actor: str, note: str) -> Released | None:
    """Lift the tree's open pause, if it has one, queueing again every task it holds but
    `task_id` (the task being resumed, moved by the caller). Call inside the resume's
    transaction, after tree_lock(). Returns None if the tree was not paused."""
    rows = db.fetchall(
        "tree_release",
        {
            "root": root_id,
            "task": str(task_id),
            "actor": actor,
            "note": f"its tree's pause was lifted by {actor}"[:500],
        },
        row=_Freed,
    )
    if not rows:
        return None
    for freed in rows:
        if freed.pool is not None:
            dispatch.pool_has_work(freed.pool, freed.queued)
    return Released(rows[0].pause_id, sum(freed.queued for freed in rows if freed.pool is not None))


@db.reads("tree_pause_close")
@dataclass(frozen=True, slots=True)
class _Closed:
    id: int  # a pause the stop closed


def tree_pauses_close(*, task_ids: list, stop_id, actor: str, reason: str) -> list[int]:
    """Close the open pause of each tree of `task_ids` that the stop left with no live
    task outside it (tree_pause_close.sql), audited `task.pause_closed` in the root's
    chain. Call in the stop's transaction, after its tasks moved to stopping. Returns
    the pauses closed."""
    rows = db.fetchall(
        "tree_pause_close",
        {
            "tasks": task_ids,
            "stop": str(stop_id),
            "actor": actor,
            "reason": reason,
            "via": json.dumps(with_via({})),
        },
        row=_Closed,
    )
    return [row.id for row in rows]


def open_pause(root_id) -> TreePause | None:
    """The tree's open pause, if any."""
    return TreePause.objects.filter(root_id=root_id, released_at__isnull=True).first()


def refusal(root_id, task_id) -> TreePaused | None:
    """The TreePaused a task of a paused tree raises before its next new step (None if
    the pause was lifted meanwhile)."""
    pause = open_pause(root_id)
    if pause is None:
        return None
    return TreePaused(
        f"the tree of task {task_id} is paused: breaker {pause.breaker} tripped at task {pause.task_id} "
        f"({pause.observed} past {pause.limit}); an operator resumes the tree",
        pause_id=pause.id,
        tripped_task=str(pause.task_id),
        breaker=pause.breaker,
        limit=pause.limit,
        observed=pause.observed,
    )


def requeue_if_lifted(*, task_id, actor: str) -> None:
    """After a running task ended `pause`, with its own row locked: if its tree's pause
    was lifted before that (the release did not see it blocked, so it did not queue it),
    queue it again now (pause_lifted.sql). Otherwise it waits for the release like the rest."""
    row = db.fetchone("pause_lifted", {"task": task_id, "actor": actor}, row=_Requeued)
    if row is not None:
        dispatch.pool_has_work(row.pool)
