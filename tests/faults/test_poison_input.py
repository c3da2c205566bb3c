"""A task whose stored input cannot be decoded fails alone, with its own code, while its
neighbours complete. Submission refuses such input; this one is written behind the
API's back, as a bad migration or a hand-edited row would. The worker claims the poison
task in the same transaction that ends the task before it (runtime/worker/executor.py), so a
decode inside that transaction would roll back an innocent task's completion."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.models import AuditEvent, Task
from tests.faults.support import attempts_of, held_slots, submit, wait_nothing_held
from tests.harness import wait_until
from tests.tamper import bypassing_the_triggers

pytestmark = [pytest.mark.integration]

DEPTH = 5000  # past any recursion limit a decoder could have left at that point


def test_an_undecodable_input_fails_its_own_task_and_no_other(live, fleet):
    ids = [submit("t.steps", {"n": 2}).task_id for _ in range(5)]
    poison = ids[2]
    # Behind the API's back, before any worker runs, and past the trigger that keeps an
    # input from being rewritten (migration 0031): as the tables' owner could.
    bypassing_the_triggers(
        "UPDATE steward_task SET input = %s::jsonb WHERE id = %s", ["[" * DEPTH + "]" * DEPTH, poison]
    )
    fleet.workers(1)
    wait_until(
        lambda: Task.objects.filter(id__in=ids, status__in=states.TERMINAL).count() == len(ids),
        message="every task to finish",
    )

    # Not the input: this process could not decode it either.
    tasks = {t.id: t for t in Task.objects.filter(id__in=ids).defer("input")}
    assert tasks[poison].status == states.FAILED
    assert tasks[poison].error["code"] == "INPUT_UNDECODABLE"
    assert attempts_of(poison) == [(1, states.FIRST, "fail")]
    for task_id in ids:
        if task_id != poison:
            assert (tasks[task_id].status, tasks[task_id].output["total"]) == (states.COMPLETED, 1)
            assert attempts_of(task_id) == [(1, states.FIRST, "complete")]  # ended once, never rolled back
    assert AuditEvent.objects.filter(task_id__in=ids, kind="task.completed").count() == len(ids) - 1
    wait_nothing_held()
    assert held_slots() == []
