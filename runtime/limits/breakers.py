"""Breakers: a task that fans out or runs away is paused for an operator, never failed.

Fan-out breakers are checked when a task spawns (runtime/tasks/children.py): at most
`max_children` children of one task, `max_depth` levels below the root, and
`max_spawns_per_minute` spawns in the whole tree. The count and the child's insert
happen in one transaction under a lock on the tree (runtime/sql/spawn_lock.sql), so a
fleet of workers racing spawns cannot admit one child past a maximum.

Runaway breakers are checked before each new step of a running attempt
(runtime/worker/context.py): at most `max_steps` journal rows, and at most
`max_wall_clock_seconds` since the task's first attempt started, sleeps, waits for
children and approvals included (docs/adr/0020-breakers.md says why). A replayed step
is never refused: it already happened.

A breaker raises BreakerTripped inside the ctx call; the executor ends the attempt
`trip`, so the task is `blocked` with `blocked_reason = breaker_tripped`, `breaker`
naming which, the refusal in `error` and `task.blocked` in the audit trail, in one
fenced statement. A fan-out trip also pauses the whole tree (runtime/limits/pauses.py):
every other task of it is refused its next new step or spawn (TreePaused, checked here
too) and blocked `tree_paused`. Nothing is journaled for the refused call: an
operator's resume (task_resume, usually raising the limit for that task) asks again.

Limits come from, lowest first: the fleet (settings STEWARD["BREAKERS"]), the agent's
declaration (`@agent(..., breakers={...})`) and an operator's override of one task
(steward_task.breaker_limits, set by a resume).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from runtime import agents, config, db, states
from runtime.attempts import interrupts
from runtime.encoding import decode
from runtime.errors import BreakerTripped
from runtime.limits import pauses

# How each limit reads in a refusal: breaker -> (limit key, what it counts).
_SAYS = {
    states.FANOUT_CHILDREN: ("max_children", "children of this task"),
    states.FANOUT_DEPTH: ("max_depth", "levels below the root"),
    states.FANOUT_RATE: ("max_spawns_per_minute", "spawns in this tree in the last minute"),
    states.RUNAWAY_STEPS: ("max_steps", "steps"),
    states.RUNAWAY_WALL_CLOCK: ("max_wall_clock_seconds", "seconds since the task first started"),
}


def limit_name(breaker: str) -> str:
    """The limit a breaker enforces: fanout_children -> max_children."""
    return _SAYS[breaker][0]


def limits_for(agent: str, overrides: dict | None = None) -> dict[str, int]:
    """The limits in force for a task of `agent`: the fleet's, the agent's over them, and
    an operator's override of the task over both."""
    return {**config.breaker_limits(), **agents.get(agent).breakers, **(overrides or {})}


@db.reads("breaker_limits")
@dataclass(frozen=True, slots=True)
class _TaskLimits:
    agent: str
    breaker_limits: str | dict | None  # an operator's override (jsonb, as text on this connection)


def limits_of(task_id) -> dict[str, int]:
    """limits_for() a task, read from its row."""
    task = db.fetchrow("breaker_limits", {"task": task_id}, row=_TaskLimits)
    return limits_for(task.agent, _decoded(task.breaker_limits))


def tripped(breaker: str, *, limit: int, observed, task_id) -> BreakerTripped:
    key, counts = _SAYS[breaker]
    return BreakerTripped(
        f"breaker {breaker} tripped: {observed:g} {counts}, past {key} = {limit} of task {task_id}; "
        f"raise the limit (resume --limit {key}=N) and resume it",
        breaker=breaker,
        limit=limit,
        observed=observed,
    )


@db.reads("spawn_breakers")
@dataclass(frozen=True, slots=True)
class _SpawnCounts:
    breaker: str | None  # the fan-out breaker the spawn trips ('tree_paused' when paused), if any
    depth: int  # the child's depth below the root
    children: int  # the parent's children, counted to max_children at most
    recent: int  # the tree's spawns in the last minute, counted to the rate at most
    paused: int | None  # the tree's open pause


def spawn_admit(lease, *, root_id, limits: dict[str, int]) -> None:
    """Raise BreakerTripped if a child of the attempt's task would pass a fan-out limit.
    Call inside the spawn's transaction, before the child's insert: the tree's lock is
    held until that transaction ends, so the next spawner of the tree sees this child."""
    db.execute("spawn_lock", {"root": str(root_id)})
    # A separate statement, after the lock: its snapshot includes any child that the
    # spawner we waited for committed (spawn_lock.sql).
    counted = db.fetchrow(
        "spawn_breakers",
        {
            "parent": lease.task_id,
            "root": root_id,
            "max_depth": limits["max_depth"],
            "max_children": limits["max_children"],
            "max_spawns_per_minute": limits["max_spawns_per_minute"],
        },
        row=_SpawnCounts,
    )
    if counted.paused is not None:
        # Read under the same lock the pause took: it stays open until this transaction
        # ends, so refusal() finds it (were it lifted, the breakers below still decide).
        refused = pauses.refusal(root_id, lease.task_id)
        if refused is not None:
            raise refused
    if counted.breaker is not None:
        observed = {
            states.FANOUT_DEPTH: counted.depth,
            states.FANOUT_CHILDREN: counted.children + 1,
            states.FANOUT_RATE: counted.recent + 1,
        }[counted.breaker]
        raise tripped(
            counted.breaker, limit=limits[_SAYS[counted.breaker][0]], observed=observed, task_id=lease.task_id
        )


@db.reads("breaker_load")
@dataclass(frozen=True, slots=True)
class _Load:
    breaker_limits: str | dict | None  # an operator's override (jsonb, as text on this connection)
    age: float | None  # seconds since the task's first attempt started, on the database's clock
    pause_id: int | None  # the tree's open pause


class StepBreakers:
    """What is checked before each new step of one attempt: the runaway breakers, and
    whether its tree is paused. The limits, the task's age and the tree's pause are read
    once, at its first new step (an attempt that only replays never asks); the age then
    grows by the worker's monotonic clock, and a pause made later reaches the attempt's
    Running (runtime/attempts/interrupts.py) from the stop watcher or the lease keeper,
    so each check costs no round trip."""

    def __init__(self, lease, agent: str, root_id):
        self.lease, self.agent, self.root_id = lease, agent, root_id
        self.limits: dict[str, int] | None = None
        self._age_at = 0.0  # seconds since the first start, on the database's clock, when read
        self._read_at = 0.0  # time.monotonic() then
        self._paused = False  # the tree had an open pause when the limits were read

    def load(self) -> dict[str, int]:
        if self.limits is None:
            loaded = db.fetchrow("breaker_load", {"task": self.lease.task_id}, row=_Load)
            self._read_at = time.monotonic()
            self.limits = limits_for(self.agent, _decoded(loaded.breaker_limits))
            self._age_at = float(loaded.age or 0.0)
            self._paused = loaded.pause_id is not None
        return self.limits

    def check(self, seq: int) -> None:
        """Before a new step at `seq` (seqs are dense from 0, so it is the seq+1th step)."""
        limits = self.load()
        run = interrupts.current()
        if self._paused or (run is not None and run.paused):
            refused = pauses.refusal(self.root_id, self.lease.task_id)
            if refused is not None:
                raise refused
            # Lifted since it was seen: carry on, and look again only when told again.
            self._paused = False
            if run is not None:
                run.paused = False
        if seq >= limits["max_steps"]:
            raise tripped(states.RUNAWAY_STEPS, limit=limits["max_steps"], observed=seq + 1, task_id=self.lease.task_id)
        age = self._age_at + (time.monotonic() - self._read_at)
        if age >= limits["max_wall_clock_seconds"]:
            raise tripped(
                states.RUNAWAY_WALL_CLOCK,
                limit=limits["max_wall_clock_seconds"],
                observed=round(age, 1),
                task_id=self.lease.task_id,
            )


def _decoded(value) -> dict | None:
    # Django's connection hands jsonb over as text (runtime/attempts/journal.py).
    return decode(value) if isinstance(value, str) else value
