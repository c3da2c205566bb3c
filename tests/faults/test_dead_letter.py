"""A task that kills its worker every time is dead-lettered after MAX_CRASHES lease
expiries in a row, holds nothing while dead, and runs again only when an operator
resumes it (a deliberate, audited new attempt)."""

import pytest

from runtime import states
from runtime.models import AuditEvent, Task
from runtime.tasks.services import task_resume
from tests.faults.support import attempts_of, held_slots, submit, wait_nothing_held
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]

MAX_CRASHES = 2


def test_a_task_that_keeps_killing_its_worker_is_dead_lettered_until_resumed(live, fleet):
    workers = fleet.workers(MAX_CRASHES + 1)
    fleet.supervisors(1, env={"STEWARD_MAX_CRASHES": str(MAX_CRASHES)})
    task_id = submit("t.crashes", {}).task_id

    task = wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.DEAD).first(),
        timeout=60,
        message="the task to be dead-lettered",
    )

    assert attempts_of(task_id) == [(1, "first", "lease_expired"), (2, "recovery", "lease_expired")]
    assert task.crash_count == MAX_CRASHES
    assert "dead-lettered" in task.status_note
    assert sum(not w.alive() for w in workers) == MAX_CRASHES  # each attempt really killed its worker
    wait_nothing_held()
    assert held_slots() == []
    kinds = list(AuditEvent.objects.filter(task_id=task_id).order_by("id").values_list("kind", flat=True))
    assert kinds.count("task.recovered") == MAX_CRASHES - 1 and kinds[-1] == "task.dead"

    task_resume(task_id=task_id, actor="user:alice", note="fixed the poison input")

    done = wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.COMPLETED).first(),
        timeout=30,
        message="the resumed task to complete",
    )
    assert done.output == {"survived": MAX_CRASHES + 1}
    assert attempts_of(task_id)[-1] == (MAX_CRASHES + 1, "resume", "complete")
    resumed = AuditEvent.objects.get(task_id=task_id, kind="task.resumed")
    assert resumed.actor == "user:alice" and resumed.data["from"] == states.DEAD
