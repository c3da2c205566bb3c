"""Human review with real worker and supervisor processes: a task waiting for approval
holds no worker, outlives every process, and acts once on what was approved; a change of
the target's ETag (the fake service's, read by the agent's precondition callback)
between request and approval makes the package stale and nothing is sent; expiry runs
the timeout branch."""

from __future__ import annotations

import pytest

from console.dev.demo.fake_service import http_json
from runtime import states
from runtime.approvals.services import approval_decide
from runtime.errors import ApprovalAlreadyDecided
from runtime.models import Approval, Attempt, Slot, Task
from runtime.tasks.services import task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


def _waiting(task_id) -> Approval:
    wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.BLOCKED, blocked_reason=states.APPROVAL_PENDING).exists(),
        message="the task to wait for approval",
    )
    return Approval.objects.filter(task_id=task_id, state=states.PENDING).order_by("part").first()


def _finished(task_id) -> Task:
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status__in=states.TERMINAL).first(), message="the task to finish"
    )


def test_all_workers_restarted_during_a_pause_then_the_approval_resumes_exactly_once(live, fleet, fake):
    old = fleet.workers(2)
    old_supervisors = fleet.supervisors(1)
    task_id = task_submit(agent="t.approve", input={"url": fake.url}, **ALICE).task_id
    approval = _waiting(task_id)
    assert not Slot.objects.filter(task_id=task_id).exists()
    assert not Attempt.objects.filter(task_id=task_id, ended_at__isnull=True).exists()

    for process in old + old_supervisors:
        process.kill()  # SIGKILL: only PostgreSQL remembers the package
    new = fleet.workers(2)
    fleet.supervisors(1)
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision="approve", comment="go")

    task = _finished(task_id)
    assert task.status == states.COMPLETED, task.error
    assert task.output["outcome"] == "done" and task.output["by"] == "user:dave"
    assert task.output["pid"] in {w.pid for w in new}
    assert fake.snapshot()["performed"] == 1  # the approved effect ran once
    assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")] == [
        ("first", "await"),
        ("resume", "complete"),
    ]
    assert Approval.objects.get(id=approval.id).state == states.CONSUMED
    with pytest.raises(ApprovalAlreadyDecided):
        approval_decide(approval_id=approval.id, tenant="acme", actor="user:erin", decision="approve")


def test_an_etag_changed_between_request_and_approval_makes_it_stale_and_nothing_is_sent(live, fleet, fake):
    fleet.workers(1)
    fleet.supervisors(1)
    task_id = task_submit(agent="t.approve", input={"url": fake.url}, **ALICE).task_id
    approval = _waiting(task_id)
    assert approval.context["precondition"] == "v1"
    http_json("POST", fake.url + "/_control", {"etag": "v2"})  # someone else changed the target

    approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision="approve")
    task = _finished(task_id)
    assert task.output == {"outcome": "stale", "reason": "the context changed: precondition"}
    assert fake.snapshot()["performed"] == 0
    assert Approval.objects.get(id=approval.id).state == states.STALE


def test_an_expired_request_runs_the_timeout_branch_and_cannot_be_approved(live, fleet, fake):
    fleet.workers(1)
    fleet.supervisors(1)
    task_id = task_submit(agent="t.approve", input={"url": fake.url, "expires_in": 1}, **ALICE).task_id
    approval = _waiting(task_id)
    task = _finished(task_id)  # nobody decided: the supervisor's sweep expired it
    assert task.output == {"outcome": "expired", "reason": ""}
    with pytest.raises(ApprovalAlreadyDecided) as refused:
        approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision="approve")
    assert refused.value.details["state"] == states.EXPIRED
    assert fake.snapshot()["performed"] == 0


def test_parallel_approvals_in_one_task_resolve_independently_across_workers(live, fleet, fake):
    fleet.workers(2)
    fleet.supervisors(1)
    task_id = task_submit(agent="t.approve_two", input={"url": fake.url}, **ALICE).task_id
    _waiting(task_id)
    first, second = Approval.objects.filter(task_id=task_id).order_by("part")
    approval_decide(approval_id=second.id, tenant="acme", actor="user:dave", decision="deny")
    # The task runs again, finds the first still pending, and waits for it, holding nothing.
    wait_until(
        lambda: Attempt.objects.filter(task_id=task_id, epoch=2, end_reason="await").exists(),
        message="the task to wait again for the other approval",
    )
    approval_decide(approval_id=first.id, tenant="acme", actor="user:dave", decision="approve")
    task = _finished(task_id)
    assert task.output == {"states": ["consumed", "denied"]}
    assert fake.snapshot()["performed"] == 1
