"""What an operator may do to a task now, and why not: one answer for the console, the API
and the CLI (task_actions), derived from the transition table (runtime/states.py).

Nothing here reads the database: the answer is the task row's status, blocked_reason and
parent alone, so a caller that lists many tasks asks it for each without a query. The
services stay the authority (each is one conditional UPDATE, which another operator's
act may have made moot since the row was read); this says what they would accept for the
row as read, and the refusal codes name why not.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

from runtime import states

E = states.TaskEvent


class Action(StrEnum):
    """What an operator does to one task (each has its service, API route and CLI command)."""

    RESUME = "resume"  # queue it for a new attempt (task_resume); in a paused tree, lift the pause
    STOP = "stop"  # stop it and every live task below it (task_stop)
    RERUN = "rerun"  # a new task that runs it again, linked to it (task_rerun)


class Refusal(StrEnum):
    """Why an action is refused for a task: stable codes the API and the CLI show."""

    STATUS = "status"  # its status is not one the action starts from (states.TASK_TRANSITIONS)
    FINISHED = "finished"  # it is completed, failed or cancelled: nothing of it is live to stop
    STOPPING = "stopping"  # it is stopping already, under an earlier stop: its stop panel shows it
    EFFECT_UNKNOWN = "effect_unknown"  # blocked on an unknown effect: resolving the effect releases it, never a resume
    APPROVAL_PENDING = "approval_pending"  # blocked on its approval: only the decision (or its expiry) releases it
    CHILD = "child"  # a child task runs again only with its parent: rerun the root


# The events out of `blocked` that an operator's resume makes (task_resume): each releases
# the one blocked_reason states.BLOCKED_BY names.
RESUME_EVENTS = (E.RESUME, E.RESET, E.RELEASE)
# The reasons a resume releases: a denial (`resume`), a breaker (`reset`) and its tree's
# pause (`release`).
RESUMABLE_BLOCKS = tuple(states.BLOCKED_BY[event] for event in RESUME_EVENTS)
# A blocked task whose reason no resume releases: why (the reason's own code).
_NOT_BY_RESUME: dict[str | None, Refusal] = {
    states.BLOCKED_BY[E.UNBLOCK]: Refusal.EFFECT_UNKNOWN,
    states.BLOCKED_BY[E.DECIDED]: Refusal.APPROVAL_PENDING,
}
# Every event that may release a blocked task (TaskActions.released_by).
RELEASING = tuple(
    event
    for event, (sources, target) in states.TASK_TRANSITIONS.items()
    if states.BLOCKED in sources and target != states.BLOCKED and event in states.BLOCKED_BY
)
# A new run is made of a cancelled task only (a finished one that did not finish by
# itself); no event moves the old task: it stays cancelled.
RERUN_FROM = frozenset({states.CANCELLED})


@dataclass(frozen=True)
class Verdict:
    """One action's answer: allowed, or the refusal's code."""

    allowed: bool
    refusal: Refusal | None = None

    def __bool__(self) -> bool:
        return self.allowed


ALLOWED = Verdict(True)


def _refused(code: Refusal) -> Verdict:
    return Verdict(False, code)


@dataclass(frozen=True)
class TaskActions:
    """What an operator may do to a task now (resume, stop, rerun), and the facts about
    its status that the console shows: templates and views ask these, never a status."""

    resume: Verdict
    stop: Verdict
    rerun: Verdict
    # For a blocked task: the event that releases it (states.BLOCKED_BY): unblock (resolve
    # its effect), decided (an approval's decision), or resume, reset, release (a resume).
    released_by: states.TaskEvent | None
    finished: bool  # terminal: it takes no more steps, and its page stops refreshing
    stopping: bool  # a stop closed its admission; it waits for its boundaries
    running: bool  # an attempt holds its lease
    denied: bool  # blocked by a denial of authority: change the grants, then resume
    tripped: bool  # blocked by a breaker: resume it, raising the limit
    paused: bool  # blocked by its tree's pause: a resume of any task of the tree lifts it
    # Neither stopping nor finished: a decision of its pending approval still applies
    # (approval_decide refuses one for a task a stop reached).
    takes_decisions: bool

    def allowed(self) -> list[Action]:
        return [action for action in Action if getattr(self, action.value).allowed]

    def of(self, action: str) -> Verdict:
        return getattr(self, Action(action).value)

    def as_dict(self) -> dict:
        """The API's and `show --json`'s shape: each action's verdict, and what releases it."""
        return {
            **{a.value: {"allowed": v.allowed, "refusal": v.refusal} for a in Action for v in [self.of(a)]},
            "released_by": self.released_by,
        }


# The facts about its status a TaskActions holds (finished, stopping, ...): what a template asks.
FACTS = frozenset(field.name for field in fields(TaskActions) if field.type == "bool")


def _released_by(blocked_reason: str | None) -> states.TaskEvent | None:
    """The event out of `blocked` that the reason requires (states.BLOCKED_BY)."""
    return next((event for event in RELEASING if states.BLOCKED_BY[event] == blocked_reason), None)


def _resume(status: str, blocked_reason: str | None) -> Verdict:
    if status not in states.sources(E.RESUME):
        return _refused(Refusal.STATUS)
    if status == states.BLOCKED and blocked_reason not in RESUMABLE_BLOCKS:
        return _refused(_NOT_BY_RESUME.get(blocked_reason, Refusal.STATUS))
    return ALLOWED


def _stop(status: str) -> Verdict:
    if status in states.sources(E.STOP):
        return ALLOWED
    return _refused(Refusal.FINISHED if status in states.TERMINAL else Refusal.STOPPING)


def _rerun(status: str, has_parent: bool) -> Verdict:
    if status not in RERUN_FROM:
        return _refused(Refusal.STATUS)
    return _refused(Refusal.CHILD) if has_parent else ALLOWED


def task_actions(task) -> TaskActions:
    """What an operator may do to `task` (a Task, or anything with its status,
    blocked_reason and parent_id) as read, and why not."""
    status = task.status
    reason = task.blocked_reason if status == states.BLOCKED else None
    return TaskActions(
        resume=_resume(status, reason),
        stop=_stop(status),
        rerun=_rerun(status, task.parent_id is not None),
        released_by=_released_by(reason) if reason is not None else None,
        finished=status in states.TERMINAL,
        stopping=status == states.STOPPING,
        running=status == states.RUNNING,
        denied=reason == states.BLOCKED_BY[E.DENY],
        tripped=reason == states.BLOCKED_BY[E.TRIP],
        paused=reason == states.BLOCKED_BY[E.PAUSE],
        takes_decisions=status not in states.TERMINAL and status != states.STOPPING,
    )


__all__ = [
    "Action",
    "Refusal",
    "Verdict",
    "TaskActions",
    "task_actions",
    "RESUMABLE_BLOCKS",
    "RERUN_FROM",
    "FACTS",
    "RELEASING",
]
