"""A task submitted through the runtime runs to completion on a real Celery worker."""

import pytest

from runtime import states
from runtime.models import Attempt, AuditEvent, Slot, Task
from runtime.tasks.services import task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


def test_a_submitted_task_completes_on_a_real_worker(live, fleet):
    (worker,) = fleet.workers(1)
    sub = task_submit(agent="t.steps", input={"n": 5}, tenant="acme", owner="user:alice", actor="user:alice")

    task = wait_until(
        lambda: Task.objects.filter(id=sub.task_id, status=states.COMPLETED).first(), message="the task to complete"
    )

    assert task.output == {"total": 10, "pid": worker.pid}
    assert [(a.epoch, a.reason, a.end_reason) for a in Attempt.objects.filter(task=task)] == [(1, "first", "complete")]
    assert list(AuditEvent.objects.filter(task_id=task.id).order_by("id").values_list("kind", flat=True)) == [
        "task.submitted",
        "attempt.started",
        "task.completed",
    ]
    assert not Slot.objects.filter(task__isnull=False).exists()
