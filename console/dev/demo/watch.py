"""`manage.py watch_demo`, which `make run` starts once Steward is up: one line as each
seeded demo task finishes or needs an operator, so that the terminal says when the demo
has something to look at. It only reads (runtime/tasks/selectors.py)."""

from __future__ import annotations

from console.dev.demo.seed import TASKS
from runtime import states
from runtime.effects.selectors import effect_page
from runtime.errors import TaskNotFound
from runtime.tasks.selectors import task_for_key

# What is worth a line: a status the task stays in until something (an operator) acts.
ANNOUNCED = states.TERMINAL | {states.BLOCKED, states.DEAD}
CLI = ".venv/bin/python manage.py steward"


class DemoWatch:
    """Call poll() now and then: it returns a line for each seeded task that has reached
    an announced status since the last poll (a task blocked, then resolved and completed,
    gets a line for each). `done` once every seeded task has finished.

    An announcement is of a (status, epoch): a task resolved and blocked again between
    two polls is on a later attempt, so it is announced again though its status is the same."""

    def __init__(self):
        self.keys = [(tenant, key) for tenant, key, *_ in TASKS]
        self.said: dict[str, tuple[str, int] | None] = dict.fromkeys(self.keys)  # key -> last announced
        self.finished: set[str] = set()

    @property
    def done(self) -> bool:
        return self.finished == set(self.keys)

    def poll(self) -> list[str]:
        lines = []
        for key in self.keys:
            tenant, caller_key = key
            try:
                task = task_for_key(tenant=tenant, key=caller_key)
            except TaskNotFound:
                continue  # not seeded (yet): nothing to say
            if task.status in states.TERMINAL:
                self.finished.add(key)
            if task.status in ANNOUNCED and (task.status, task.epoch) != self.said[key]:
                lines.append(_line(task))
                self.said[key] = (task.status, task.epoch)
        if lines and self.done:
            lines.append("every demo task has finished")
        return lines


def _line(task) -> str:
    name = f"demo task {task.agent} {task.id} ({task.tenant})"
    if task.status == states.COMPLETED:
        took = (task.finished_at - task.created_at).total_seconds()
        return f"{name} completed ({took:.0f} s after it was submitted)"
    if task.status == states.BLOCKED:
        unknown = effect_page(task=task.id, state=states.UNKNOWN, limit=1).items
        if unknown:
            effect = unknown[0]
            return (
                f"{name} is blocked: effect #{effect.id} ({effect.name!r}) may or may not have happened.\n"
                f"  see it:    {CLI} effects --state unknown\n"
                f"  settle it: {CLI} resolve-effect {effect.id} --as committed|failed|retry"
            )
        if task.blocked_reason == states.APPROVAL_PENDING:
            return (
                f"{name} waits for a person's approval ({task.status_note}).\n"
                f"  decide it: sign in as alice, open Approvals; or {CLI} --actor user:alice approvals approve ID"
                f" --tenant {task.tenant}\n"
                f"  (its ID: {CLI} approvals list --tenant {task.tenant})"
            )
        return f"{name} is blocked: {task.status_note}"
    if task.status == states.DEAD:
        return f"{name} is dead ({task.status_note}); after fixing the cause: {CLI} resume {task.id}"
    return f"{name} {task.status}" + (f": {task.status_note}" if task.status_note else "")
