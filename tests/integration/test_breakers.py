"""Breakers on real worker processes: a runaway task is blocked by the worker that runs
it, named in its row and audit trail; nothing re-runs it, whatever the supervisor
sweeps; an operator's resume with a raised limit finishes it on a worker. The fleet's
limits come from the workers' environment (settings STEWARD["BREAKERS"])."""

import pytest

from runtime import states
from runtime.models import Attempt, AuditEvent, Step, Task
from runtime.tasks.services import task_resume, task_submit
from runtime.worker.supervisor import sweep
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


def reached(task_id, status: str, *, timeout: float = 30.0) -> Task:
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status=status).first(),
        timeout=timeout,
        message=f"task {task_id} to be {status}",
    )


def attempts(task_id) -> list[tuple[str, str]]:
    return [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")]


def test_a_runaway_task_is_blocked_by_its_worker_and_a_resume_with_more_steps_finishes_it(live, fleet):
    (worker,) = fleet.workers(1)
    fleet.supervisors(1)
    t = task_submit(agent="t.loop", input={"steps": 8}, **ALICE).task_id

    blocked = reached(t, states.BLOCKED)
    assert (blocked.blocked_reason, blocked.breaker, blocked.error["limit"], blocked.error["observed"]) == (
        states.BREAKER_TRIPPED,
        states.RUNAWAY_STEPS,
        5,
        6,
    )
    assert Step.objects.filter(task_id=t).count() == 5
    [attempt] = Attempt.objects.filter(task_id=t)
    assert (attempt.end_reason, attempt.worker.endswith(f":{worker.pid}")) == ("trip", True)
    event = AuditEvent.objects.get(task_id=t, kind="task.blocked")
    assert (event.actor, event.data["breaker"]) == (f"worker:{attempt.worker}", states.RUNAWAY_STEPS)

    # Sweeps (the supervisor process's, and two of ours) and another task run past it:
    # it stays blocked on its one attempt.
    sweep(supervisor_id="test")
    other = task_submit(agent="t.steps", input={"n": 1}, **ALICE).task_id
    reached(other, states.COMPLETED)
    sweep(supervisor_id="test")
    assert Task.objects.get(id=t).status == states.BLOCKED and attempts(t) == [("first", "trip")]

    task_resume(task_id=t, actor="user:alice", note="it needs eight", limits={"max_steps": 8})
    done = reached(t, states.COMPLETED)
    assert done.output == {"done": 8} and attempts(t) == [("first", "trip"), ("resume", "complete")]


def test_wall_clock_runs_across_a_durable_sleep_and_trips_on_the_worker_that_wakes_it(live, fleet):
    fleet.workers(1)
    fleet.supervisors(1)  # its sweep wakes the timer
    t = task_submit(agent="t.lingers", input={"nap": 1.5}, **ALICE).task_id

    blocked = reached(t, states.BLOCKED)
    assert (blocked.breaker, blocked.error["limit"]) == (states.RUNAWAY_WALL_CLOCK, 1)
    assert blocked.error["observed"] >= 1.5
    assert attempts(t) == [("first", "sleep"), ("resume", "trip")]


def test_a_fan_out_past_the_childrens_maximum_blocks_the_parent_and_pauses_its_children(live, fleet):
    fleet.workers(2)
    fleet.supervisors(1)
    t = task_submit(agent="t.fanout", input={"n": 5}, **ALICE).task_id

    blocked = reached(t, states.BLOCKED)
    assert blocked.breaker == states.FANOUT_CHILDREN
    kids = Task.objects.filter(parent_id=t)
    wait_until(lambda: not kids.filter(status=states.RUNNING).exists(), message="its children to pause or finish")
    # Each admitted child either finished before the trip or is held by the tree's pause
    # (tests/integration/test_tree_pause.py); none is left to run.
    assert kids.count() == 3
    assert set(kids.values_list("status", "blocked_reason")) <= {
        (states.COMPLETED, None),
        (states.BLOCKED, states.TREE_PAUSED),
    }
    task_resume(task_id=t, actor="user:alice", limits={"max_children": 5})
    assert reached(t, states.COMPLETED).output == {"values": [0, 2, 4, 6, 8]}


def test_the_fleets_limits_come_from_the_workers_environment(live, fleet):
    fleet.workers(1, env={"STEWARD_BREAKER_MAX_STEPS": "2"})
    t = task_submit(agent="t.steps", input={"n": 3}, **ALICE).task_id  # declares no limit: 4 steps

    blocked = reached(t, states.BLOCKED)
    assert (blocked.breaker, blocked.error["limit"], blocked.error["observed"]) == (states.RUNAWAY_STEPS, 2, 3)
