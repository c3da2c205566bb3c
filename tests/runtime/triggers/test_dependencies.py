"""Dependency triggers (runtime/triggers/dependencies.py): a task starts once every named
task completed; a failed or cancelled prerequisite follows the trigger's policy."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.errors import InvalidArgument
from runtime.models import AuditEvent, DependencyTrigger, Task
from runtime.tasks.services import task_submit
from runtime.triggers.dependencies import dependency_settle
from runtime.triggers.services import dependencies_settle, dependency_create
from tests.harness import race

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


def task(status=None):
    task_id = task_submit(agent="t.steps", input={}, **ALICE).task_id
    if status:
        Task.objects.filter(id=task_id).update(status=status)
    return task_id


def trigger(prereqs, on_failure="skip"):
    return dependency_create(
        agent="t.steps",
        input={"after": "prereqs"},
        prerequisites=[str(p) for p in prereqs],
        on_failure=on_failure,
        **ALICE,
    )


def test_it_waits_until_every_prerequisite_completed_then_starts_one_task(live):
    a, b = task(), task()
    t = trigger([a, b])
    Task.objects.filter(id=a).update(status=states.COMPLETED)
    assert dependencies_settle(actor="supervisor:test") == 0
    Task.objects.filter(id=b).update(status=states.COMPLETED)
    assert dependencies_settle(actor="supervisor:test") == 1
    t.refresh_from_db()
    assert t.state == "fired" and Task.objects.get(id=t.task_id).input == {"after": "prereqs"}
    assert dependencies_settle(actor="supervisor:test") == 0  # settled once


@pytest.mark.parametrize("failed_as", [states.FAILED, states.CANCELLED])
@pytest.mark.parametrize(
    "policy, state, starts", [("skip", "skipped", False), ("fail", "failed", False), ("run", "fired", True)]
)
def test_a_failed_or_cancelled_prerequisite_follows_the_policy(live, failed_as, policy, state, starts):
    ok, bad, running = task(states.COMPLETED), task(failed_as), task()
    t = trigger([ok, bad, running], on_failure=policy)
    dependencies_settle(actor="supervisor:test")
    t.refresh_from_db()
    if policy == "run":
        assert t.state == "waiting"  # run anyway, but only once every prerequisite finished
        Task.objects.filter(id=running).update(status=states.COMPLETED)
        dependencies_settle(actor="supervisor:test")
        t.refresh_from_db()
    assert t.state == state and (t.task_id is not None) == starts
    if not starts:
        assert str(bad) in t.reason and failed_as in t.reason
    assert AuditEvent.objects.filter(kind=f"dependency.{state}", data__trigger=str(t.id)).count() == 1


def test_two_supervisors_settle_a_trigger_once(live):
    for _ in range(20):
        t = trigger([task(states.COMPLETED)])
        won = race(2, lambda i: dependency_settle(trigger_id=t.id, actor=f"supervisor:{i}"))
        assert sorted(won) == [False, True]
        assert Task.objects.filter(idempotency_key=f"dependency:{t.id}").count() == 1


def test_an_unknown_or_other_tenants_prerequisite_is_refused(live):
    other = task_submit(agent="t.steps", input={}, tenant="globex", owner="user:carol", actor="user:carol").task_id
    with pytest.raises(InvalidArgument):
        trigger([other])
    with pytest.raises(InvalidArgument):
        trigger(["01a2328d-c517-7ada-88f5-db7b23a46c29"])
    with pytest.raises(InvalidArgument):
        trigger([])
    assert not DependencyTrigger.objects.exists()
