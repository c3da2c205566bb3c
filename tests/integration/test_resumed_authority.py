"""docs/contracts.md §2 with real worker processes: work resumed after a sleep, a
recovery from a killed worker, or an operator's resume re-checks its authority on
current rows before its next effect, down the lineage. The seed's stale-authority
fixture: start a permitted task, persist it (it sleeps), narrow the owner's grant, let
it wake on a worker and take the old action: blocked, the denial naming its boundary."""

from __future__ import annotations

import time

import pytest

from runtime import states
from runtime.authz import POLICY_VERSION
from runtime.authz.selectors import authz_revision
from runtime.authz.services import grant_create, grant_narrow, grant_revoke
from runtime.models import Attempt, AuditEvent, Decision, Effect, Task
from runtime.tasks.services import task_resume, task_submit
from tests.agents import WRITE
from tests.faults.support import sigkill
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]

ADMIN = "user:dave"
OWNER = "user:alice"


def give(principal: str, resource: str = "repo:acme/*", action: str = WRITE[0]):
    return grant_create(tenant="acme", principal=principal, action=action, resource=resource, actor=ADMIN)


def submit(agent: str, input: dict):
    return task_submit(agent=agent, input=input, tenant="acme", owner=OWNER, actor=OWNER).task_id


def in_status(task_id, status: str, timeout: float = 30.0) -> Task:
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status=status).first(),
        timeout=timeout,
        message=f"task {task_id} to be {status}",
    )


def child_of(parent_id) -> Task:
    return wait_until(lambda: Task.objects.filter(parent_id=parent_id).first(), message=f"a child of {parent_id}")


def attempts(task_id) -> list[tuple[str, str | None]]:
    return [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")]


def worker_pids(fleet) -> set[int]:
    return {p.pid for p in fleet.processes if "worker" in p.argv}


def test_a_child_asleep_when_its_owners_grant_is_narrowed_wakes_on_a_worker_and_is_blocked(live, fleet):
    give("agent:t.scoped")
    give("agent:t.requires")
    owner_grant = give(OWNER)
    fleet.workers(2)
    fleet.supervisors(1)
    root = submit(
        "t.scoped", {"children": [{"agent": "t.requires", "input": {"seconds": 1.5}, "scope": [list(WRITE)]}]}
    )
    child = child_of(root)
    in_status(child.id, states.SLEEPING)  # permitted so far, persisted, holding no worker

    narrowed = grant_narrow(
        grant_id=owner_grant.id,
        tenant="acme",
        resource="repo:acme/docs*",
        actor=ADMIN,
        reason="alice keeps the docs only",
    )

    blocked = in_status(child.id, states.BLOCKED)
    decision = Decision.objects.get(id=blocked.blocked_decision_id)
    # Actor, owner, child task, parent task, attempt epoch and policy version: distinct fields.
    assert (
        decision.actor,
        decision.owner,
        decision.task_id,
        decision.parent_task,
        decision.epoch,
        decision.policy_version,
    ) == ("agent:t.requires", OWNER, child.id, root, 2, POLICY_VERSION)
    assert (decision.allowed, decision.boundary, decision.reason_code, decision.action, decision.resource) == (
        False,
        "worker",
        "no_grant_owner",
        *WRITE,
    )
    assert decision.authz_revision == narrowed.revision == authz_revision(tenant="acme")
    assert blocked.error["boundary"] == "worker" and blocked.blocked_reason == states.AUTHORITY_DENIED
    assert attempts(child.id) == [("first", "sleep"), ("resume", "deny")]
    woke_on = Attempt.objects.get(task_id=child.id, epoch=2).worker
    assert int(woke_on.rsplit(":", 1)[1]) in worker_pids(fleet)  # a real worker process decided
    assert not Effect.objects.filter(task_id=child.id).exists()  # the old action never reached the ledger
    event = AuditEvent.objects.get(task_id=child.id, kind="task.blocked")
    assert (event.data["decision_id"], event.data["boundary"]) == (str(decision.id), "worker")
    assert Task.objects.get(id=root).status == states.WAITING

    # It stays blocked: five sweeps of the supervisor (STEWARD_SWEEP_SECONDS=0.2) leave it.
    time.sleep(1.0)
    assert attempts(child.id) == [("first", "sleep"), ("resume", "deny")]
    assert Task.objects.get(id=child.id).status == states.BLOCKED

    # An operator restores the authority and resumes it: it checks again and completes.
    give(OWNER, resource="repo:acme/app")
    task_resume(task_id=child.id, actor="user:alice", note="grant restored for app")
    done = in_status(child.id, states.COMPLETED)
    assert attempts(child.id)[-1] == ("resume", "complete") and done.output["receipt"]["wrote"] == WRITE[1]
    in_status(root, states.COMPLETED)


def test_a_worker_killed_mid_call_then_a_revoke_the_recovered_attempt_is_denied_before_it_resends(live, fleet, fake):
    give("agent:t.requires")
    owner_grant = give(OWNER)
    fake.push("hang")  # performed, then never answered: the worker dies with an intent only
    fleet.workers(2)
    t = submit("t.requires", {"url": fake.url})
    assert fake.wait_for_hung(1, timeout=30), "the service never received the call"
    (first_call,) = fake.calls()
    sigkill(fleet, int(first_call["worker"]))
    (intent,) = Effect.objects.filter(task_id=t)
    assert (intent.state, intent.sends) == (states.INTENT, 1)

    revoked = grant_revoke(grant_id=owner_grant.id, tenant="acme", actor=ADMIN, reason="alice left")
    fleet.supervisors(1)  # recovers the task; a surviving worker takes the new attempt

    blocked = in_status(t, states.BLOCKED)
    decision = Decision.objects.get(id=blocked.blocked_decision_id)
    assert (decision.boundary, decision.reason_code, decision.epoch) == ("worker", "no_grant_owner", 2)
    assert decision.authz_revision >= revoked.revision
    assert attempts(t) == [("first", "lease_expired"), ("recovery", "deny")]
    # Keyed and reversible, recovery would have re-sent it: the check came first.
    intent.refresh_from_db()
    assert (intent.state, intent.sends, intent.epoch) == (states.INTENT, 1, 1)
    assert len(fake.calls()) == 1


def test_three_levels_down_a_sleeping_grandchild_is_denied_when_the_roots_owner_grant_is_narrowed(live, fleet):
    give("agent:t.scoped")
    give("agent:t.requires")
    owner_grant = give(OWNER)
    fleet.workers(2)
    fleet.supervisors(1)
    leaf = {"agent": "t.requires", "input": {"seconds": 1.5}, "scope": [["repo.write", "repo:acme/*"]]}
    middle = {"agent": "t.scoped", "input": {"children": [leaf]}, "scope": [["repo.write", "repo:acme/*"]]}
    root = submit("t.scoped", {"children": [middle]})
    grandchild = child_of(child_of(root).id)
    in_status(grandchild.id, states.SLEEPING)

    grant_narrow(
        grant_id=owner_grant.id,
        tenant="acme",
        resource="repo:acme/docs*",
        actor=ADMIN,
        reason="narrowed at the root's owner",
    )

    blocked = in_status(grandchild.id, states.BLOCKED)
    decision = Decision.objects.get(id=blocked.blocked_decision_id)
    assert (decision.boundary, decision.reason_code, decision.parent_task, decision.epoch) == (
        "worker",
        "no_grant_owner",
        grandchild.parent_id,
        2,
    )
    assert grandchild.root_id == root
    assert {Task.objects.get(id=root).status, Task.objects.get(id=grandchild.parent_id).status} == {states.WAITING}


def test_on_a_real_worker_the_hostile_text_reaches_no_grant_and_every_path_names_its_boundary(live, fleet):
    from runtime.models import Grant, Step
    from tests.runtime.authz.test_hostile_text import EXPECTED

    target = give(OWNER, resource="repo:acme/*", action="repo.read")
    before = list(Grant.objects.order_by("id").values_list()), authz_revision(tenant="acme")
    fleet.workers(1)
    t = submit("t.hostile", {"grant_id": target.id})
    blocked = in_status(t, states.BLOCKED)
    child = in_status(child_of(t).id, states.BLOCKED)

    assert (list(Grant.objects.order_by("id").values_list()), authz_revision(tenant="acme")) == before
    tried = Step.objects.get(task_id=t, name="tried").output
    assert {path: (tried[path]["code"], tried[path]["boundary"]) for path in EXPECTED} == EXPECTED
    for task in (blocked, child):
        assert Decision.objects.get(id=task.blocked_decision_id).boundary == "worker"
