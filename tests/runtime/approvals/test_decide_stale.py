"""An approve checks, at decision time, what the package is bound to and the database
holds (issue 17, point 8; docs/adr/0017-approvals.md): the tenant's authz_revision, the
policy_version, the task's input digest and the expiry. A change is refused 409
APPROVAL_STALE naming it, before and after; the package then reads `stale`, as the
executor's re-check would have left it, and the task goes on to its stale branch. The
executor still re-checks: a grant change racing the approve ends, in every trial, either
refused at the decision or approved and found stale by the worker, never acted on."""

from __future__ import annotations

import collections
import time

import pytest

from runtime import states
from runtime.approvals.services import approval_decide
from runtime.authz.selectors import authz_revision
from runtime.authz.services import grant_create
from runtime.errors import ApprovalAlreadyDecided, ApprovalStale
from runtime.models import Approval, AuditEvent, Task
from tests.harness import race
from tests.runtime.approvals.test_approvals import BOB, _asked, _pending, sent, world
from tests.runtime.inprocess import run


@pytest.fixture(autouse=True)
def _fresh():
    # test_approvals' agent (approvals.pay) pays through `sent` and reads `world`.
    sent.clear()
    world.update(amount=10, etag="v1")


def _grant_change():
    grant_create(tenant="acme", principal="user:alice", action="note.write", resource="note:x", actor="user:alice")


def _approve(approval):
    return approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="approve", comment="ok")


def test_approving_after_a_grant_change_is_refused_naming_the_revision_and_the_package_reads_stale(live):
    task_id = _asked()
    approval = _pending(task_id)
    before = approval.context["authz_revision"]
    _grant_change()
    with pytest.raises(ApprovalStale) as refused:
        _approve(approval)
    assert (refused.value.code, refused.value.status) == ("APPROVAL_STALE", 409)
    assert refused.value.details["changed"] == {"authz_revision": {"before": before, "after": before + 1}}
    assert refused.value.details["state"] == states.STALE
    why = f"the context changed: authz_revision {before} → {before + 1}"
    approval.refresh_from_db()
    assert (approval.state, approval.stale_reason, approval.decided_by) == (states.STALE, why, BOB)
    (event,) = AuditEvent.objects.filter(task_id=task_id, kind="approval.stale")
    assert (event.actor, event.data["changed"], event.data["reason"]) == (BOB, refused.value.details["changed"], why)
    assert not AuditEvent.objects.filter(task_id=task_id, kind="approval.approved").exists()
    # The task goes on, and the agent sees what the executor would have told it.
    assert Task.objects.get(id=task_id).status == states.QUEUED
    run()
    assert Task.objects.get(id=task_id).output == {"outcome": "stale", "reason": why}
    assert sent["pay"] == 0
    with pytest.raises(ApprovalAlreadyDecided) as again:
        _approve(approval)
    assert again.value.details["state"] == states.STALE


def test_a_policy_version_change_is_named_before_and_after(live, monkeypatch):
    approval = _pending(_asked())
    monkeypatch.setattr("runtime.approvals.services.POLICY_VERSION", "2099-01-01.1")
    with pytest.raises(ApprovalStale) as refused:
        _approve(approval)
    assert refused.value.details["changed"] == {
        "policy_version": {"before": approval.context["policy_version"], "after": "2099-01-01.1"}
    }


def test_an_input_digest_changed_behind_the_apis_back_is_named_too(live):
    task_id = _asked()
    approval = _pending(task_id)
    Task.objects.filter(id=task_id).update(input_digest="0" * 64)
    _grant_change()
    with pytest.raises(ApprovalStale) as refused:
        _approve(approval)
    changed = refused.value.details["changed"]
    assert set(changed) == {"authz_revision", "input_digest"}
    assert changed["input_digest"] == {"before": approval.context["input_digest"], "after": "0" * 64}
    assert Approval.objects.get(id=approval.id).stale_reason.startswith("the context changed: authz_revision "), (
        "each change, in name order"
    )


def test_a_deny_of_a_stale_package_is_recorded_as_a_denial(live):
    task_id = _asked()
    approval = _pending(task_id)
    _grant_change()
    denied = approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="deny", comment="no")
    assert (denied.state, denied.stale_reason) == (states.DENIED, "")
    run()
    assert Task.objects.get(id=task_id).output == {"outcome": "denied", "reason": ""}


def test_an_unchanged_package_is_approved_as_before(live):
    task_id = _asked()
    approved = _approve(_pending(task_id))
    assert (approved.state, approved.stale_reason) == (states.APPROVED, "")
    run()
    assert Task.objects.get(id=task_id).output == {"outcome": "paid", "by": BOB}


def test_a_decision_past_the_expiry_expires_the_package_and_wakes_the_task(live):
    task_id = _asked({"expires_in": 0.2})
    approval = _pending(task_id)
    time.sleep(0.3)
    with pytest.raises(ApprovalAlreadyDecided) as refused:
        _approve(approval)
    assert refused.value.details["state"] == states.EXPIRED
    approval.refresh_from_db()
    assert (approval.state, approval.decided_by) == (states.EXPIRED, None)  # before any sweep
    assert AuditEvent.objects.filter(task_id=task_id, kind="approval.expired").count() == 1
    assert Task.objects.get(id=task_id).status == states.QUEUED
    run()
    assert Task.objects.get(id=task_id).output == {"outcome": "expired", "reason": ""}


def _trial() -> str:
    """One approve racing one grant change, released together by a barrier; then the
    task's next attempt. Returns how it ended."""
    task_id = _asked()
    approval = _pending(task_id)
    revision = authz_revision(tenant="acme")
    decided, _ = race(2, lambda i: _grant_change() if i else _approve(approval))
    assert authz_revision(tenant="acme") == revision + 1
    run()
    task, approval = Task.objects.get(id=task_id), Approval.objects.get(id=approval.id)
    # Never acted on under the changed authority, whichever way it went.
    assert sent["pay"] == 0 and task.output["outcome"] == "stale", (decided, task.output)
    assert approval.state == states.STALE
    if isinstance(decided, ApprovalStale):
        assert decided.details["changed"]["authz_revision"] == {"before": revision, "after": revision + 1}
        return "409 at the decision"
    assert getattr(decided, "state", None) == states.APPROVED, decided
    assert approval.stale_reason == "the context changed: authz_revision"
    return "approved, stale at the re-check"


def test_a_grant_change_racing_an_approve_is_never_acted_on_over_30_trials(live):
    outcomes = collections.Counter(_trial() for _ in range(30))
    print(dict(outcomes))
    assert sum(outcomes.values()) == 30


@pytest.mark.stress
def test_a_grant_change_racing_an_approve_is_never_acted_on_over_300_trials(live):
    outcomes = collections.Counter(_trial() for _ in range(300))
    print(dict(outcomes))
    assert sum(outcomes.values()) == 300
