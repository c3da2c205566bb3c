"""A fan-out trip pauses its whole tree (runtime/limits/pauses.py): the tree's idle tasks
are held in the pause's transaction, a running one ends before its next new step, no
spawn of the tree is admitted, and an operator's resume of any task of the tree lifts
the pause. Attempts run in this process; tests/integration/test_tree_pause.py runs the
same on worker processes, and tests/runtime/test_tree_pause_race.py races it.

The trees are tests/tree_agents.py's: t.grove spawns t.sapling children, maybe a
t.napper (a durable sleep) and a t.bramble, whose second spawn trips max_children 1.
"""

from __future__ import annotations

import threading

import pytest

from runtime import states
from runtime.attempts.lease import claim_next
from runtime.limits import pauses
from runtime.limits.services import default_pool_name
from runtime.models import AuditEvent, Step, Task, TreePause
from runtime.tasks.services import task_resume
from runtime.worker import executor, stop_watch
from runtime.worker.executor import run_attempt
from runtime.worker.stop_watch import watch
from runtime.worker.supervisor import sweep
from tests.harness import wait_until
from tests.runtime.inprocess import run, submit
from tests.runtime.test_cli import steward
from tests.tree_agents import GATES

pytestmark = pytest.mark.usefixtures("transactional_db")


def task(task_id) -> Task:
    return Task.objects.get(id=task_id)


def kid(parent, agent: str) -> Task:
    return Task.objects.get(parent_id=parent, agent=agent)


def state(task_id) -> tuple[str, str | None]:
    t = task(task_id)
    return t.status, t.blocked_reason


def last_event(task_id, kind: str) -> AuditEvent:
    return AuditEvent.objects.filter(task_id=task_id, kind=kind).order_by("-chain_seq").first()


HELD = (states.BLOCKED, states.TREE_PAUSED)


def paused_grove(**extra):
    """A grove whose bramble tripped: the napper asleep, the grove waiting and the
    bramble's first child queued when the pause came."""
    root = submit("t.grove", {"saplings": 0, "steps": 0, "nap": 3600, **extra})
    run()
    return root, kid(root, "t.napper").id, kid(root, "t.bramble").id


def test_a_fan_out_trip_holds_the_trees_waiting_sleeping_and_queued_tasks():
    root, napper, bramble = paused_grove()
    first = kid(bramble, "t.child").id

    b = task(bramble)
    assert (b.status, b.blocked_reason, b.breaker) == (states.BLOCKED, states.BREAKER_TRIPPED, states.FANOUT_CHILDREN)
    [pause] = TreePause.objects.filter(root_id=root)
    assert (pause.task_id, pause.breaker, pause.limit, pause.observed, pause.held, pause.released_at) == (
        bramble,
        states.FANOUT_CHILDREN,
        1,
        2,
        3,
        None,
    )
    assert b.error["pause_id"] == pause.id and "paused" in b.status_note
    trip = last_event(bramble, "task.blocked")
    assert (trip.data["pause_id"], trip.data["tree_held"], trip.data["tree_paused"]) == (pause.id, 3, "opened")

    # The grove was waiting, the napper sleeping, the child queued: each is held, audited
    # with what it was and the pause that holds it.
    for held, was in ((root, states.WAITING), (napper, states.SLEEPING), (first, states.QUEUED)):
        assert state(held) == HELD, held
        event = last_event(held, "task.blocked")
        assert (
            event.data["blocked_reason"],
            event.data["from"],
            event.data["pause_id"],
            event.data["breaker"],
            event.data["tripped_task"],
        ) == (states.TREE_PAUSED, was, pause.id, states.FANOUT_CHILDREN, str(bramble))
    # Nothing runs, nothing wakes: the held child never ran a step.
    sweep(supervisor_id="test")
    assert run() == 0 and not Step.objects.filter(task_id=first).exists()
    assert all(state(t) == HELD for t in (root, napper, first))


def test_resuming_the_tripped_task_with_a_raised_limit_lifts_the_pause_and_the_tree_finishes():
    root, napper, bramble = paused_grove(nap=0.05)
    first = kid(bramble, "t.child").id
    pause = TreePause.objects.get(root_id=root)

    resumed = task_resume(task_id=bramble, actor="user:alice", note="two is fine", limits={"max_children": 2})

    assert (resumed.pause_id, resumed.tree_queued) == (pause.id, 3)
    pause.refresh_from_db()
    assert (pause.released_by, pause.released, pause.released_at is not None) == ("user:alice", 3, True)
    assert {state(t) for t in (root, napper, first, bramble)} == {(states.QUEUED, None)}
    event = last_event(bramble, "task.resumed")
    assert (event.data["tree_pause_lifted"], event.data["tree_queued"], event.data["limits"]) == (
        pause.id,
        3,
        {"max_children": 2},
    )
    for released in (root, napper, first):
        event = last_event(released, "task.resumed")
        assert (event.actor, event.data["pause_id"], event.data["by_resume_of"]) == (
            "user:alice",
            pause.id,
            str(bramble),
        )

    run()
    wait_until(
        lambda: (sweep(supervisor_id="test"), run(), task(root).status == states.COMPLETED)[-1],
        message="the tree to finish",
    )
    assert task(root).output == {"statuses": [states.COMPLETED, states.COMPLETED]}
    assert task(bramble).output == {"values": [0, 2]}


def test_a_held_sleeper_sleeps_out_its_time_after_the_release_and_is_not_woken_while_held():
    root, napper, bramble = paused_grove()
    wake_at = Step.objects.get(task_id=napper, kind="sleep").output["wake_at"]

    task_resume(task_id=root, actor="user:alice", note="let the rest go on")
    run()

    n = task(napper)
    assert (n.status, n.wake_at.timestamp()) == (states.SLEEPING, pytest.approx(wake_at))


def test_resuming_a_held_task_lifts_the_pause_and_leaves_the_tripped_task_blocked_until_it_is_resumed():
    root, napper, bramble = paused_grove()
    first = kid(bramble, "t.child").id

    resumed = task_resume(task_id=first, actor="user:alice", note="the child may finish")

    assert resumed.tree_queued == 2  # the grove and the napper; the child is the resumed task itself
    assert state(bramble) == (states.BLOCKED, states.BREAKER_TRIPPED)
    run()
    assert task(first).status == states.COMPLETED
    assert task(root).status == states.WAITING  # for the bramble, still blocked

    # Resumed without a raised limit, the bramble trips again: a second pause, held anew.
    task_resume(task_id=bramble, actor="user:alice", note="try again")
    run()
    assert state(bramble) == (states.BLOCKED, states.BREAKER_TRIPPED)
    pauses = list(TreePause.objects.filter(root_id=root).order_by("id"))
    assert [p.released_at is None for p in pauses] == [False, True]
    assert state(root) == HELD


def test_a_running_task_of_a_paused_tree_finishes_its_step_and_pauses_before_the_next():
    """The sapling is in its first step when the bramble trips; the stop watcher's
    notification marks its attempt (read here as a worker's watcher reads it); the step
    ends and is journaled, the next one never starts."""
    GATES["pause"] = gate = threading.Event()
    root = submit("t.grove", {"saplings": 1, "steps": 3, "gate": "pause"})
    run_attempt(claim_next(pool=default_pool_name(), worker="test"))  # the grove spawns and waits
    sapling = kid(root, "t.sapling").id
    claim = claim_next(pool=default_pool_name(), worker="test")
    assert claim.lease.task_id == sapling
    runner = threading.Thread(target=run_attempt, args=(claim,))
    runner.start()
    try:
        wait_until(lambda: task(sapling).status == states.RUNNING, message="the sapling to run")
        run()  # the bramble trips; the pause holds the grove, and the bramble's child
        assert TreePause.objects.filter(root_id=root, released_at__isnull=True).exists()
        with stop_watch._listen() as listener:
            watch._check(listener)  # what a worker's watcher does on the pause's notification
        assert task(sapling).status == states.RUNNING  # not interrupted
    finally:
        gate.set()
        runner.join(10)
    assert state(sapling) == HELD
    assert list(Step.objects.filter(task_id=sapling).values_list("name", flat=True)) == ["s0"]
    event = last_event(sapling, "task.blocked")
    assert (event.data["blocked_reason"], event.data["pause_id"]) == (
        states.TREE_PAUSED,
        TreePause.objects.get(root_id=root).id,
    )
    assert task(sapling).error["code"] == "TREE_PAUSED"


def test_a_task_queued_during_the_pause_blocks_at_its_first_new_step():
    """A task the pause did not hold (blocked on something else at the time, then
    released by its own act: an effect resolved, a decision) reads the pause with its
    limits at its first new step, and is blocked before that step runs."""
    root, napper, bramble = paused_grove()
    first = kid(bramble, "t.child").id
    Task.objects.filter(id=first).update(status=states.QUEUED, blocked_reason=None)  # as if released elsewhere
    run()
    assert state(first) == HELD
    assert task(first).error["code"] == "TREE_PAUSED"
    assert not Step.objects.filter(task_id=first).exists()


def test_a_running_task_that_saw_the_pause_carries_on_if_it_is_lifted_before_its_next_step():
    GATES["late"] = gate = threading.Event()
    root = submit("t.grove", {"saplings": 1, "steps": 2, "gate": "late"})
    run_attempt(claim_next(pool=default_pool_name(), worker="test"))
    sapling = kid(root, "t.sapling").id
    runner = threading.Thread(target=run_attempt, args=(claim_next(pool=default_pool_name(), worker="test"),))
    runner.start()
    try:
        wait_until(lambda: task(sapling).status == states.RUNNING, message="the sapling to run")
        run()  # the bramble trips and pauses the tree
        with stop_watch._listen() as listener:
            watch._check(listener)  # the sapling's attempt is marked paused
        resumed = task_resume(task_id=kid(root, "t.bramble").id, actor="user:alice", limits={"max_children": 2})
        assert resumed.tree_queued == 2  # the grove and the bramble's child; the sapling was running
    finally:
        gate.set()
        runner.join(10)
    assert task(sapling).status == states.COMPLETED  # it looked again at its next step: lifted
    assert list(Step.objects.filter(task_id=sapling).order_by("seq").values_list("name", flat=True)) == ["s0", "s1"]


def test_an_attempt_that_ends_paused_after_the_pause_was_lifted_is_queued_again_at_once():
    """The release queues what the pause holds; an attempt that was refused its step by
    the pause just before the release ends `pause` just after it. Nothing else would
    ever queue it, so its own end does (pause_lifted.sql), under its row lock. The race
    is tests/runtime/test_tree_pause_race.py; this is its one ordering, made certain."""
    root = submit("t.grove", {"saplings": 1, "steps": 2})
    run_attempt(claim_next(pool=default_pool_name(), worker="test"))
    sapling = claim_next(pool=default_pool_name(), worker="test")  # running, its code not yet started
    run()  # the bramble trips and pauses the tree
    refused = pauses.refusal(root, sapling.lease.task_id)
    task_resume(task_id=kid(root, "t.bramble").id, actor="user:alice", limits={"max_children": 2})

    executor._paused(sapling, refused)

    assert state(sapling.lease.task_id) == (states.QUEUED, None)
    event = last_event(sapling.lease.task_id, "task.resumed")
    assert event.data == {"from": "blocked", "blocked_reason": states.TREE_PAUSED, "pause_lifted": True}
    run()
    assert task(sapling.lease.task_id).status == states.COMPLETED


def test_the_cli_shows_the_pause_and_says_what_its_resume_lifted():
    root, napper, bramble = paused_grove()
    pause = TreePause.objects.get(root_id=root)
    shown = steward("show", str(root))
    assert "tree_paused (resume any task of its tree to lift the pause)" in shown
    assert f"pause {pause.id}: breaker fanout_children tripped at {pause.task_id}" in shown
    said = steward("resume", str(pause.task_id), "--limit", "max_children=2")
    assert f"lifted its tree's pause {pause.id}: 3 other tasks queued again" in said


# --- a paused tree that is stopped (issue 20) ------------------------------------------


def test_stopping_a_paused_tree_closes_its_pause_in_the_stops_transaction_audited():
    """Issue 20: the tree was cancelled and its pause stayed open, so the dashboard and
    every task page of it went on saying it was paused, waiting for a person."""
    from runtime.limits.selectors import open_pauses, tree_pause_of
    from runtime.stops.services import task_stop

    root, napper, bramble = paused_grove()
    pause = TreePause.objects.get(root_id=root)

    started = task_stop(task_id=root, actor="user:alice", reason="runaway tree")

    pause.refresh_from_db()
    assert (pause.released_by, pause.released, pause.released_at is not None) == ("user:alice", 0, True)
    assert open_pauses(tenant="acme") == [] and tree_pause_of(task(root)) is None
    closed = last_event(root, "task.pause_closed")
    assert (closed.actor, closed.data["pause_id"], closed.data["stop"], closed.data["reason"]) == (
        "user:alice",
        pause.id,
        str(started.stop_id),
        "runaway tree",
    )
    assert {task(t).status for t in (root, napper, bramble)} == {states.CANCELLED}


def test_stopping_a_subtree_of_a_paused_tree_leaves_the_pause_holding_the_rest():
    from runtime.stops.services import task_stop

    root, napper, bramble = paused_grove()

    task_stop(task_id=bramble, actor="user:alice", reason="just the bramble")

    assert TreePause.objects.get(root_id=root).released_at is None
    assert state(root) == HELD and state(napper) == HELD
    assert not AuditEvent.objects.filter(kind="task.pause_closed").exists()
