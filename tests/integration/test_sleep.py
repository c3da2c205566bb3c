"""Durable sleep: ctx.sleep() ends the attempt, so a sleeping task holds no worker, and
the timer lives in PostgreSQL, so it outlives every worker and supervisor process."""

import pytest

from runtime import states
from runtime.models import Attempt, Slot, Task
from runtime.tasks.services import task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


def task_in(task_id, status: str):
    return Task.objects.filter(id=task_id, status=status).first()


def attempts(task_id) -> list[tuple[str, str]]:
    return [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")]


def test_a_sleeping_task_frees_its_worker_for_other_tasks(live, fleet):
    (worker,) = fleet.workers(1)  # one process: whatever else runs, runs on it
    fleet.supervisors(1)
    sleeper = task_submit(agent="t.sleeper", input={"seconds": 3}, **ALICE).task_id
    asleep = wait_until(lambda: task_in(sleeper, states.SLEEPING), message="the sleeper to fall asleep")

    quick = [task_submit(agent="t.steps", input={"n": 2}, **ALICE).task_id for _ in range(5)]
    wait_until(
        lambda: Task.objects.filter(id__in=quick, status=states.COMPLETED).count() == 5,
        message="the quick tasks to complete",
    )

    # They all ran on the one worker while the sleeper was still asleep on its timer.
    assert Task.objects.get(id=sleeper).status == states.SLEEPING
    for task in Task.objects.filter(id__in=quick):
        assert task.output["pid"] == worker.pid
        assert task.finished_at < asleep.wake_at
    assert not Slot.objects.filter(task_id=sleeper).exists()

    done = wait_until(lambda: task_in(sleeper, states.COMPLETED), message="the sleeper to wake and complete")
    assert done.output == {"before_pid": worker.pid, "after_pid": worker.pid}
    assert attempts(sleeper) == [("first", "sleep"), ("resume", "complete")]
    woke = Attempt.objects.get(task_id=sleeper, epoch=2)
    assert woke.started_at >= asleep.wake_at  # the timer was honoured, not cut short


def test_a_sleeping_task_wakes_after_every_worker_and_supervisor_was_replaced(live, fleet):
    old = fleet.workers(2)
    old_supervisors = fleet.supervisors(1)
    sleeper = task_submit(agent="t.sleeper", input={"seconds": 2}, **ALICE).task_id
    wait_until(lambda: task_in(sleeper, states.SLEEPING), message="the sleeper to fall asleep")

    for process in old + old_supervisors:
        process.kill()  # SIGKILL: nothing is handed over, only PostgreSQL remembers
    old_pids = {w.pid for w in old}
    assert task_in(sleeper, states.SLEEPING)

    new = fleet.workers(2)
    fleet.supervisors(1)
    done = wait_until(lambda: task_in(sleeper, states.COMPLETED), message="the sleeper to complete on new workers")

    new_pids = {w.pid for w in new}
    assert done.output["before_pid"] in old_pids
    assert done.output["after_pid"] in new_pids
    assert attempts(sleeper) == [("first", "sleep"), ("resume", "complete")]
    assert done.crash_count == 0
    assert not Slot.objects.filter(task__isnull=False).exists()
