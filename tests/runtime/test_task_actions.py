"""task_actions (runtime/tasks/actions.py): what an operator may do to a task in each
status (and each reason a task is blocked), and why not. The table is written out by
hand: it is what the console shows, the API answers and the CLI prints, so a change to
the transition table that moves an answer shows up here as a decision to make."""

from __future__ import annotations

import uuid

import pytest

from runtime import states
from runtime.models import Task
from runtime.tasks.actions import FACTS, Action, task_actions

# (status, blocked_reason) -> resume, stop, rerun (True, or the refusal's code), released_by
TABLE = {
    ("queued", None): ("status", True, "status", None),
    ("running", None): ("status", True, "status", None),
    ("sleeping", None): ("status", True, "status", None),
    ("waiting", None): ("status", True, "status", None),
    ("blocked", "effect_unknown"): ("effect_unknown", True, "status", "unblock"),
    ("blocked", "authority_denied"): (True, True, "status", "resume"),
    ("blocked", "approval_pending"): ("approval_pending", True, "status", "decided"),
    ("blocked", "breaker_tripped"): (True, True, "status", "reset"),
    ("blocked", "tree_paused"): (True, True, "status", "release"),
    ("dead", None): (True, True, "status", None),
    ("stopping", None): ("status", "stopping", "status", None),
    ("completed", None): ("status", "finished", "status", None),
    ("failed", None): (True, "finished", "status", None),
    ("cancelled", None): (True, "finished", True, None),
}
# status or blocked_reason -> the facts that hold (every other fact is false)
FACTS_TRUE = {
    "queued": {"takes_decisions"},
    "running": {"running", "takes_decisions"},
    "sleeping": {"takes_decisions"},
    "waiting": {"takes_decisions"},
    "effect_unknown": {"takes_decisions"},
    "authority_denied": {"denied", "takes_decisions"},
    "approval_pending": {"takes_decisions"},
    "breaker_tripped": {"tripped", "takes_decisions"},
    "tree_paused": {"paused", "takes_decisions"},
    "dead": {"takes_decisions"},
    "stopping": {"stopping"},
    "completed": {"finished"},
    "failed": {"finished"},
    "cancelled": {"finished"},
}


def test_the_table_covers_every_status_and_every_blocked_reason():
    assert {status for status, _ in TABLE} == set(states.TASK_STATUSES)
    assert {reason for status, reason in TABLE if status == states.BLOCKED} == set(states.BLOCKED_REASONS)
    assert set(FACTS_TRUE) == set(states.TASK_STATUSES) - {states.BLOCKED} | set(states.BLOCKED_REASONS)
    assert set().union(*FACTS_TRUE.values()) == FACTS


@pytest.mark.parametrize(("status", "reason"), sorted(TABLE, key=str))
def test_what_an_operator_may_do_to_a_root_task(status, reason):
    acts = task_actions(Task(id=uuid.uuid4(), status=status, blocked_reason=reason))
    expected = dict(zip(["resume", "stop", "rerun"], TABLE[status, reason][:3], strict=True))
    answered = {a.value: True if acts.of(a).allowed else acts.of(a).refusal for a in Action}
    assert answered == expected
    assert acts.released_by == TABLE[status, reason][3]
    assert [a.value for a in acts.allowed()] == [name for name, v in expected.items() if v is True]
    # A verdict is either allowed or names its refusal, never both nor neither.
    for action in Action:
        assert acts.of(action).allowed == (acts.of(action).refusal is None) == bool(acts.of(action))
    assert {fact for fact in FACTS if getattr(acts, fact)} == FACTS_TRUE[reason or status]


@pytest.mark.parametrize("status", states.TASK_STATUSES)
def test_a_child_task_is_never_run_again_on_its_own(status):
    """A rerun of a child is refused (child) where a root's would be allowed; resume and
    stop do not depend on the parent."""
    reason = states.EFFECT_UNKNOWN if status == states.BLOCKED else None
    root = task_actions(Task(status=status, blocked_reason=reason))
    child = task_actions(Task(status=status, blocked_reason=reason, parent_id=uuid.uuid4()))
    assert child.rerun.refusal == ("child" if root.rerun.allowed else root.rerun.refusal)
    assert (child.resume, child.stop) == (root.resume, root.stop)


def test_a_blocked_reason_is_read_only_while_the_task_is_blocked():
    """A resumed task's row may keep nothing stale, but the answer never depends on it."""
    acts = task_actions(Task(status=states.QUEUED, blocked_reason=states.AUTHORITY_DENIED))
    assert acts.released_by is None and not acts.denied and not acts.resume.allowed


def test_the_api_shape_names_every_action_and_the_releasing_event():
    shape = task_actions(Task(status=states.BLOCKED, blocked_reason=states.EFFECT_UNKNOWN)).as_dict()
    assert shape == {
        "resume": {"allowed": False, "refusal": "effect_unknown"},
        "stop": {"allowed": True, "refusal": None},
        "rerun": {"allowed": False, "refusal": "status"},
        "released_by": "unblock",
    }
