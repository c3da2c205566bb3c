"""authorize() decides on current rows: the intersection of the agent's grants, the
owner's, what a child asked for and its parent's authority, at every call. Each decision
is recorded with its boundary, reason and the revision it saw; each denial is audited
in the task's chain."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from runtime.authz import POLICY_VERSION
from runtime.authz.selectors import Authority, authz_revision, decisions_page, effective_authority
from runtime.authz.services import authorize, grant_narrow, grant_revoke, raise_if_denied
from runtime.errors import AuthorityDenied, StewardError
from runtime.models import AuditEvent, Decision, Grant, Task
from tests.runtime.authz.common import ADMIN, AGENT, OWNER, child, give, give_both, task

pytestmark = pytest.mark.usefixtures("transactional_db")


def check(task_id, resource="repo:acme/docs", action="tool.search", boundary="worker", **kw) -> Decision:
    return authorize(task=task_id, action=action, resource=resource, boundary=boundary, **kw)


def denials(task_id) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(task_id=task_id, kind="authz.denied").order_by("id"))


def test_a_task_whose_agent_and_owner_both_hold_the_grant_is_allowed_and_the_decision_is_recorded():
    t = task()
    give_both()
    decision = check(t)
    assert (decision.allowed, decision.reason_code, decision.boundary) == (True, "granted", "worker")
    assert (decision.policy_version, decision.authz_revision) == (POLICY_VERSION, authz_revision(tenant="acme"))
    assert Decision.objects.get(id=decision.id).allowed and denials(t) == []
    assert raise_if_denied(decision) is decision


@pytest.mark.parametrize(
    "holders, reason",
    [
        ((), "no_grant_agent"),
        ((OWNER,), "no_grant_agent"),
        ((f"agent:{AGENT}",), "no_grant_owner"),
    ],
)
def test_the_intersection_of_agent_and_owner_denies_what_either_lacks(holders, reason):
    t = task()
    for principal in holders:
        give(principal)
    decision = check(t)
    assert (decision.allowed, decision.reason_code) == (False, reason)
    [event] = denials(t)
    assert (event.data["decision_id"], event.data["reason_code"], event.data["boundary"]) == (
        str(decision.id),
        reason,
        "worker",
    )
    with pytest.raises(AuthorityDenied) as error:
        raise_if_denied(decision)
    assert (
        error.value.code,
        error.value.status,
        error.value.boundary,
        error.value.reason_code,
        error.value.decision_id,
    ) == ("AUTHORITY_DENIED", 403, "worker", reason, str(decision.id))


def test_patterns_cover_by_prefix_and_exact_grants_only_their_value():
    t = task()
    give_both("tool.search", "repo:acme/*")
    give_both("http.post", "https://api.example.com/v1/issues")
    assert check(t, "repo:acme/docs/readme").allowed
    assert not check(t, "repo:acmeX").allowed  # "repo:acme/" is the prefix, not "repo:acme"
    assert check(t, "https://api.example.com/v1/issues", action="http.post").allowed
    assert not check(t, "https://api.example.com/v1/issues/1", action="http.post").allowed
    assert not check(t, "repo:acme/docs", action="http.post").allowed  # actions are exact


def test_an_expired_grant_does_not_count_and_says_so():
    t = task()
    agent_grant, _ = give_both()
    # Only the database clock passing can expire a grant; move its expiry into the past
    # the way time would, bypassing the service's future-only check (the trigger allows
    # an earlier expiry).
    Grant.objects.filter(id=agent_grant.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    decision = check(t)
    assert (decision.allowed, decision.reason_code) == (False, "grant_expired")


def test_a_revoked_grant_does_not_count_from_the_next_call():
    t = task()
    _, owner_grant = give_both()
    assert check(t).allowed
    grant_revoke(grant_id=owner_grant.id, tenant="acme", actor=ADMIN, reason="off")
    decision = check(t)
    assert (decision.allowed, decision.reason_code) == (False, "no_grant_owner")


def test_a_child_asking_for_more_than_its_parent_holds_gets_the_intersection():
    parent = task()
    give(f"agent:{AGENT}", "tool.search", "repo:acme/docs/*")  # the parent's agent holds less ...
    give(OWNER, "tool.search", "repo:*")  # ... than the owner
    give("agent:t.child", "tool.search", "repo:*")  # ... and the child's agent
    kid = child(parent, agent="t.child", requested_scope=[{"action": "tool.search", "resource": "repo:*"}])
    assert check(kid, "repo:acme/docs/a").allowed
    decision = check(kid, "repo:acme/src/a")
    assert (decision.allowed, decision.reason_code) == (False, "parent_lacks")
    assert effective_authority(kid) == [Authority("tool.search", "repo:acme/docs/*", None)]


def test_a_child_is_held_to_what_it_asked_for_at_spawn():
    parent = task()
    give_both("tool.search", "repo:*")
    give("agent:t.child", "tool.search", "repo:*")
    kid = child(parent, agent="t.child", requested_scope=[{"action": "tool.search", "resource": "repo:acme/a"}])
    assert check(kid, "repo:acme/a").allowed
    assert check(kid, "repo:acme/b").reason_code == "not_requested"
    inherits = child(parent, agent="t.child", spawn_seq=2)  # asked for nothing in particular
    assert check(inherits, "repo:acme/b").allowed


def test_narrowing_the_parent_denies_the_child_and_grandchild_at_once():
    parent = task()
    agent_grant, _ = give_both("tool.search", "repo:acme/*")
    give("agent:t.child", "tool.search", "repo:acme/*")
    kid = child(parent, agent="t.child")
    grandkid = child(kid, agent="t.child")
    assert check(grandkid).allowed
    grant_narrow(grant_id=agent_grant.id, tenant="acme", resource="repo:acme/src/*", actor=ADMIN, reason="less")
    for descendant in (kid, grandkid):
        decision = check(descendant, "repo:acme/docs")
        assert (decision.allowed, decision.reason_code) == (False, "parent_lacks")
    assert check(grandkid, "repo:acme/src/a").allowed
    assert not check(parent, "repo:acme/docs").allowed


def test_stale_authority_a_permitted_task_is_denied_once_its_owner_is_narrowed():
    """The contract's pass condition at the service level: permitted, persisted, owner
    narrowed, the old action is denied by current authority and the record keeps actor,
    owner, parent, child, epoch and policy version apart."""
    parent = task()
    give_both("tool.search", "repo:acme/*")
    give("agent:t.child", "tool.search", "repo:acme/*")
    kid = child(parent, agent="t.child")
    Task.objects.filter(id=kid).update(epoch=3)  # as if it had been resumed twice
    before = check(kid, boundary="credential_gateway")
    assert before.allowed
    [owner_grant] = Grant.objects.filter(principal=OWNER)
    grant_narrow(
        grant_id=owner_grant.id,
        tenant="acme",
        resource="repo:acme/src/*",
        actor=ADMIN,
        reason="narrowed while the task slept",
    )
    after = check(kid, boundary="credential_gateway")
    assert (after.allowed, after.boundary, after.reason_code) == (False, "credential_gateway", "no_grant_owner")
    stored = Decision.objects.get(id=after.id)
    assert (stored.actor, stored.owner, stored.task_id, stored.parent_task, stored.epoch, stored.policy_version) == (
        "agent:t.child",
        OWNER,
        kid,
        parent,
        3,
        POLICY_VERSION,
    )
    assert stored.authz_revision == before.authz_revision + 1
    [event] = denials(kid)
    assert (event.actor, event.data["owner"], event.data["epoch"], event.data["parent_task"]) == (
        "agent:t.child",
        OWNER,
        3,
        str(parent),
    )
    assert check(kid, epoch=2, boundary="credential_gateway").epoch == 2  # the attempt asked about


def test_decisions_are_append_only():
    t = task()
    decision = check(t)
    with pytest.raises(IntegrityError), transaction.atomic():
        Decision.objects.filter(id=decision.id).update(allowed=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        Decision.objects.filter(id=decision.id).delete()


@pytest.mark.parametrize(
    "code, bad",
    [
        ("TASK_NOT_FOUND", {"task": "0190b2d0-0000-7000-8000-000000000000"}),
        ("TASK_NOT_FOUND", {"task": "not-a-uuid"}),
        ("INVALID_RESOURCE_PATTERN", {"resource": "repo:acme/*"}),  # one resource, never a pattern
        ("INVALID_RESOURCE_PATTERN", {"resource": "x" * 100_000}),
        ("INVALID_RESOURCE_PATTERN", {"resource": "a\x00"}),
        ("INVALID_IDENTIFIER", {"action": "DROP TABLE"}),
        ("INVALID_ARGUMENT", {"boundary": "nowhere"}),
        ("ARGUMENT_OUT_OF_RANGE", {"epoch": -1}),
        ("ARGUMENT_OUT_OF_RANGE", {"epoch": 2**40}),
    ],
)
def test_hostile_arguments_to_authorize_are_refused_and_record_nothing(code, bad):
    t = task()
    args = {"task": t, "action": "tool.search", "resource": "repo:acme/docs", "boundary": "worker", **bad}
    with pytest.raises(StewardError) as error:
        authorize(**args)
    assert error.value.code == code
    assert Decision.objects.count() == 0


def test_effective_authority_is_what_authorize_allows():
    t = task()
    give(f"agent:{AGENT}", "tool.search", "repo:*")
    give(OWNER, "tool.search", "repo:acme/*")
    give(OWNER, "tool.search", "repo:acme/docs")  # covered by the pattern: not listed twice
    give(OWNER, "model.chat", "gpt-x")  # the agent lacks it: not listed
    assert effective_authority(t) == [Authority("tool.search", "repo:acme/*", None)]
    assert check(t, "repo:acme/anything").allowed and not check(t, "gpt-x", action="model.chat").allowed


def test_decisions_page_by_tenant_task_and_outcome():
    t, other = task(), task()
    give_both()
    allowed, denied = check(t), check(t, "elsewhere")
    check(other)
    assert [d.id for d in decisions_page(tenant="acme", task=t)] == [denied.id, allowed.id]
    assert [d.id for d in decisions_page(tenant="acme", task=t, allowed=False)] == [denied.id]
    first = decisions_page(tenant="acme", limit=2)
    assert len(first) == 2 and first.next is not None
    assert len(decisions_page(tenant="acme", limit=2, after=first.next)) == 1
    assert list(decisions_page(tenant="globex")) == []
    with pytest.raises(StewardError) as error:
        decisions_page(tenant="globex", task=t)
    assert error.value.code == "TASK_NOT_FOUND"  # another tenant's task is not found


def test_a_decision_racing_a_revocation_sees_either_the_grant_or_its_revocation_never_a_mix():
    """One statement, one snapshot: every allow names a revision from before the revoke,
    every decision naming the revoke's revision (or later) is a deny. Counted over trials."""
    from tests.harness import race

    outcomes = {"allowed": 0, "denied": 0}
    for trial in range(30):
        t = task()
        _, owner_grant = give_both("tool.search", f"repo:acme/{trial}/*")

        def either(i: int):
            if i == 0:
                return grant_revoke(grant_id=owner_grant.id, tenant="acme", actor=ADMIN, reason="race")
            return check(t, f"repo:acme/{trial}/x", boundary="credential_gateway")

        results = race(4, either)
        revoked, decisions = results[0], results[1:]
        assert not any(isinstance(r, Exception) for r in results), results
        for decision in decisions:
            assert decision.allowed == (decision.authz_revision < revoked.revision), (decision, revoked.revision)
            outcomes["allowed" if decision.allowed else "denied"] += 1
        assert not check(t, f"repo:acme/{trial}/x").allowed  # after the revoke committed: denied
    assert sum(outcomes.values()) == 90


def test_a_lineage_that_crosses_tenants_is_denied_at_tenant_isolation():
    """No service makes such a child; if a row ever said so, the check refuses rather than
    lend one tenant's authority to another's task."""
    from runtime.tasks.services import insert_task

    parent = task()
    give_both()
    give_both(tenant="globex", owner="user:carol")
    stray = insert_task(
        agent=AGENT,
        input_text="{}",
        digest="stray",
        tenant="globex",
        owner="user:carol",
        pool=Task.objects.get(id=parent).pool_id,
        actor="user:carol",
        parent_id=parent,
        root_id=parent,
        spawn_seq=1,
    ).task_id
    decision = check(stray)
    assert (decision.allowed, decision.boundary, decision.reason_code) == (False, "tenant_isolation", "tenant_mismatch")
    assert effective_authority(stray) == []
