"""Authority at the worker (runtime/worker/authority.py): an effect that requires an
action is checked on current rows before its intent is written; a denial blocks the
task visibly, with the decision on its row and `task.blocked` naming it; nothing re-runs
it by itself; an operator's resume re-checks. Attempts run in this process."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.authz import EXECUTOR_BOUNDARY, POLICY_VERSION
from runtime.authz.services import grant_narrow, grant_revoke
from runtime.effects.services import effect_resolve
from runtime.errors import InvalidArgument, InvalidTransition
from runtime.models import Attempt, AuditEvent, Decision, Effect, Step, Task
from runtime.tasks.selectors import task_detail
from runtime.tasks.services import task_resume, task_submit
from runtime.worker import authority
from runtime.worker.supervisor import sweep
from tests.agents import WRITE
from tests.runtime.authz.common import ADMIN, OWNER, give, give_both
from tests.runtime.inprocess import run

pytestmark = pytest.mark.usefixtures("transactional_db")


def submit(agent: str, input: dict | None = None):
    return task_submit(agent=agent, input=input or {}, tenant="acme", owner=OWNER, actor=OWNER).task_id


def attempts(task_id) -> list[tuple[str, str]]:
    return [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")]


def kinds(task_id) -> list[str]:
    return list(AuditEvent.objects.filter(task_id=task_id).order_by("chain_seq").values_list("kind", flat=True))


def test_an_effect_whose_authority_is_held_is_checked_at_the_worker_and_runs():
    give_both(*WRITE, agent="t.requires")
    t = submit("t.requires")
    run()
    task = Task.objects.get(id=t)
    assert task.status == states.COMPLETED and task.output["receipt"]["wrote"] == WRITE[1]
    [decision] = Decision.objects.filter(task_id=t)
    assert (decision.allowed, decision.boundary, decision.epoch, decision.action, decision.resource) == (
        True,
        EXECUTOR_BOUNDARY,
        1,
        *WRITE,
    )
    assert (task.blocked_reason, task.blocked_decision_id) == (None, None)


def test_a_denied_effect_blocks_the_task_with_its_decision_and_writes_no_intent():
    give(OWNER, *WRITE)  # the owner may; the agent has no grant of its own
    t = submit("t.requires")
    run()
    task = Task.objects.get(id=t)
    [decision] = Decision.objects.filter(task_id=t)
    assert (decision.allowed, decision.reason_code, decision.boundary) == (False, "no_grant_agent", "worker")
    assert (task.status, task.blocked_reason, task.blocked_decision_id) == (
        states.BLOCKED,
        states.AUTHORITY_DENIED,
        decision.id,
    )
    assert task.error == {
        "code": "AUTHORITY_DENIED",
        "type": "AuthorityDenied",
        "boundary": "worker",
        "reason_code": "no_grant_agent",
        "decision_id": str(decision.id),
        "message": task.error["message"],
    }
    assert "denied at worker" in task.error["message"] and "resume" in task.status_note
    assert not Effect.objects.filter(task_id=t).exists()  # checked before the intent
    assert attempts(t) == [("first", "deny")]
    blocked = AuditEvent.objects.get(task_id=t, kind="task.blocked")
    assert blocked.data["blocked_reason"] == states.AUTHORITY_DENIED
    assert (
        blocked.data["decision_id"],
        blocked.data["boundary"],
        blocked.data["reason_code"],
        blocked.data["authz_revision"],
        blocked.data["policy_version"],
    ) == (str(decision.id), "worker", "no_grant_agent", decision.authz_revision, POLICY_VERSION)
    assert kinds(t)[-2:] == ["authz.denied", "task.blocked"]
    # Shown by the runtime's detail selector (the console's and the API's source).
    detail = task_detail(t)
    assert (detail.task.blocked_reason, detail.task.blocked_decision_id) == (states.AUTHORITY_DENIED, decision.id)


def test_nothing_reruns_a_denied_task_by_itself():
    t = submit("t.requires")
    run()
    assert Task.objects.get(id=t).status == states.BLOCKED
    for _ in range(3):
        sweep(supervisor_id="test")
        assert run() == 0
    assert attempts(t) == [("first", "deny")] and Decision.objects.filter(task_id=t).count() == 1


@pytest.mark.parametrize(
    "then, swallowed",
    [(None, {"swallowed": "AuthorityDenied"}), ("step", {"swallowed": "AuthorityDenied", "then": "AuthorityDenied"})],
)
def test_agent_code_that_swallows_a_denial_is_blocked_anyway_and_journals_nothing_after_it(then, swallowed):
    t = submit("t.swallows", {"then": then} if then else {})
    run()
    task = Task.objects.get(id=t)
    assert (task.status, task.blocked_reason, task.output) == (states.BLOCKED, states.AUTHORITY_DENIED, None)
    assert not Step.objects.filter(task_id=t).exists()  # the sticky denial refused the step
    assert task.error["boundary"] == "worker"


def test_an_operator_resume_rechecks_on_current_rows_blocked_again_until_the_grants_change():
    give(OWNER, *WRITE)
    t = submit("t.requires")
    run()
    first = Task.objects.get(id=t).blocked_decision_id

    task_resume(task_id=t, actor="user:alice", note="try again")  # grants unchanged
    resumed = AuditEvent.objects.filter(task_id=t, kind="task.resumed").get()
    assert resumed.data == {
        "from": "blocked",
        "note": "try again",
        "blocked_reason": "authority_denied",
        "decision_id": str(first),
    }
    assert Task.objects.get(id=t).blocked_reason is None
    run()
    again = Task.objects.get(id=t)
    assert again.status == states.BLOCKED and again.blocked_decision_id != first
    assert Decision.objects.get(id=again.blocked_decision_id).epoch == 2

    give("agent:t.requires", *WRITE)
    task_resume(task_id=t, actor="user:alice")
    run()
    done = Task.objects.get(id=t)
    assert done.status == states.COMPLETED and done.output["epoch"] == 3
    assert attempts(t) == [("first", "deny"), ("resume", "deny"), ("resume", "complete")]
    assert [d.allowed for d in Decision.objects.filter(task_id=t).order_by("id")] == [False, False, True]


def test_resume_refuses_a_task_blocked_on_an_unknown_effect_and_resolving_one_releases_only_that_kind(fake):
    fake.set_mode("unkeyed")
    fake.push("drop")  # performed, then the connection drops: unknown, not re-sent
    t = submit("t.effect", {"url": fake.url, "keyed": False})
    run()
    task = Task.objects.get(id=t)
    assert (task.status, task.blocked_reason) == (states.BLOCKED, states.EFFECT_UNKNOWN)
    assert AuditEvent.objects.get(task_id=t, kind="task.blocked").data["blocked_reason"] == states.EFFECT_UNKNOWN
    with pytest.raises(InvalidTransition) as refused:
        task_resume(task_id=t, actor="user:alice")
    assert refused.value.details["blocked_reason"] == states.EFFECT_UNKNOWN
    assert Task.objects.get(id=t).status == states.BLOCKED
    effect = Effect.objects.get(task_id=t)
    effect_resolve(effect_id=effect.id, outcome="committed", actor="user:alice")
    task = Task.objects.get(id=t)
    assert (task.status, task.blocked_reason) == (states.QUEUED, None)


def test_resolving_an_effect_never_releases_a_task_blocked_by_a_denial():
    t = submit("t.requires")
    run()
    # The task also carries an unknown effect (as after an earlier block and retry): settling
    # it must leave the denial in force.
    attempt = Attempt.objects.get(task_id=t)
    effect = Effect.objects.create(
        key=f"{t}/9/old",
        task_id=t,
        tenant="acme",
        step_seq=9,
        name="old",
        effect_class="irreversible",
        keyed=False,
        state=states.UNKNOWN,
        request_digest="0" * 64,
        attempt=attempt,
        epoch=1,
        sends=1,
    )
    effect_resolve(effect_id=effect.id, outcome="failed", actor="user:alice")
    task = Task.objects.get(id=t)
    assert (task.status, task.blocked_reason) == (states.BLOCKED, states.AUTHORITY_DENIED)
    assert "task.unblocked" not in kinds(t)


def test_a_blocked_task_must_say_why_and_a_denied_one_must_name_its_decision():
    from django.db import IntegrityError, transaction

    t = submit("t.steps")
    with pytest.raises(IntegrityError, match="task_blocked_says_why"), transaction.atomic():
        Task.objects.filter(id=t).update(status=states.BLOCKED)
    with pytest.raises(IntegrityError, match="task_denied_names_its_decision"), transaction.atomic():
        Task.objects.filter(id=t).update(status=states.BLOCKED, blocked_reason=states.AUTHORITY_DENIED)


# --- children ask for a scope --------------------------------------------------------------


def scoped_tree(scope, *, resource=WRITE[1]):
    """A t.scoped parent spawning one t.requires child that asks for `scope` and then
    takes repo.write on `resource`."""
    return submit("t.scoped", {"children": [{"agent": "t.requires", "input": {"resource": resource}, "scope": scope}]})


def only_child(parent_id) -> Task:
    return Task.objects.get(parent_id=parent_id)


def test_a_child_asks_for_a_scope_stored_on_its_row_and_named_in_its_submission():
    give_both("repo.write", "repo:acme/*", agent="t.scoped")
    give_both("repo.write", "repo:acme/*", agent="t.requires")
    parent = scoped_tree([["repo.write", "repo:acme/app"], {"action": "repo.read", "resource": "repo:acme/*"}])
    run()
    kid = only_child(parent)
    assert kid.requested_scope == [
        {"action": "repo.write", "resource": "repo:acme/app"},
        {"action": "repo.read", "resource": "repo:acme/*"},
    ]
    submitted = AuditEvent.objects.get(task_id=kid.id, kind="task.submitted")
    assert submitted.data["requested_scope"] == kid.requested_scope
    assert kid.status == states.COMPLETED and Task.objects.get(id=parent).status == states.COMPLETED
    # Replay returns the same child: one child, its spawn journaled once.
    assert Task.objects.filter(parent_id=parent).count() == 1
    assert Step.objects.get(task_id=parent, kind="spawn").output == {"task_id": str(kid.id)}


def test_a_child_asking_for_more_than_its_parent_holds_gets_the_intersection():
    give_both("repo.write", "repo:acme/app*", agent="t.scoped")  # the parent: app only
    give_both("repo.write", "repo:acme/*", agent="t.requires")  # the child's own agent: more
    parent = scoped_tree([["repo.write", "*"]], resource="repo:acme/other")
    run()
    kid = only_child(parent)
    decision = Decision.objects.get(id=kid.blocked_decision_id)
    assert (kid.status, decision.reason_code, decision.boundary, decision.parent_task) == (
        states.BLOCKED,
        "parent_lacks",
        "worker",
        parent,
    )
    # Within what both hold, the same wide ask is allowed.
    parent2 = scoped_tree([["repo.write", "*"]], resource="repo:acme/app")
    run()
    assert only_child(parent2).status == states.COMPLETED


def test_a_child_is_held_to_what_it_asked_for_even_when_its_parent_holds_more():
    give_both("repo.write", "repo:acme/*", agent="t.scoped")
    give_both("repo.write", "repo:acme/*", agent="t.requires")
    parent = scoped_tree([["repo.write", "repo:acme/docs*"]], resource="repo:acme/app")
    run()
    kid = only_child(parent)
    assert Decision.objects.get(id=kid.blocked_decision_id).reason_code == "not_requested"


def test_narrowing_the_parent_denies_the_child_at_its_next_check():
    parent_grant, _ = give_both("repo.write", "repo:acme/*", agent="t.scoped")
    give_both("repo.write", "repo:acme/*", agent="t.requires")
    parent = submit(
        "t.scoped",
        {"children": [{"agent": "t.requires", "input": {"seconds": 0.05}, "scope": [["repo.write", "repo:acme/*"]]}]},
    )
    run()  # the parent spawns and waits; the child sleeps
    kid = only_child(parent)
    assert kid.status == states.SLEEPING
    grant_narrow(
        grant_id=parent_grant.id,
        tenant="acme",
        resource="repo:acme/docs*",
        actor=ADMIN,
        reason="the parent's agent loses app",
    )
    from tests.runtime.inprocess import wake

    wake()
    run()
    kid = only_child(parent)
    decision = Decision.objects.get(id=kid.blocked_decision_id)
    assert (kid.status, decision.reason_code, decision.epoch) == (states.BLOCKED, "parent_lacks", 2)


def test_three_levels_down_a_grandchild_is_denied_once_the_roots_owner_grant_is_narrowed():
    for name in ("t.scoped", "t.requires"):
        give(f"agent:{name}", "repo.write", "repo:acme/*")
    owner_grant = give(OWNER, "repo.write", "repo:acme/*")
    leaf = {"agent": "t.requires", "input": {"seconds": 0.05}, "scope": [["repo.write", "repo:acme/*"]]}
    middle = {"agent": "t.scoped", "input": {"children": [leaf]}, "scope": [["repo.write", "repo:acme/*"]]}
    root = submit("t.scoped", {"children": [middle]})
    run()
    child = only_child(root)
    grandchild = only_child(child.id)
    assert (grandchild.status, grandchild.root_id) == (states.SLEEPING, root)
    grant_revoke(grant_id=owner_grant.id, tenant="acme", actor=ADMIN, reason="alice leaves the repo")
    from tests.runtime.inprocess import wake

    wake()
    run()
    grandchild = Task.objects.get(id=grandchild.id)
    decision = Decision.objects.get(id=grandchild.blocked_decision_id)
    assert (grandchild.status, decision.reason_code, decision.parent_task, decision.owner) == (
        states.BLOCKED,
        "no_grant_owner",
        child.id,
        OWNER,
    )


@pytest.mark.parametrize(
    "scope",
    [
        "repo.write",
        [("repo.write",)],
        [{"action": "repo.write"}],
        [("Repo Write", "x")],
        [("repo.write", "a*b")],
        {"repo.write": "x"},
    ],
)
def test_a_malformed_scope_is_refused_before_anything_is_journaled(scope):
    with pytest.raises(InvalidArgument):
        authority.scope(scope)


@pytest.mark.parametrize("requires", ["repo.write", ("repo.write",), ("repo.write", "repo:acme/*"), 3])
def test_an_effect_requires_one_action_on_one_resource(requires):
    with pytest.raises(InvalidArgument):
        authority.need(requires)


def test_output_from_outside_is_recorded_untrusted_and_shown_by_the_selectors():
    from runtime.effects.selectors import effect_page
    from runtime.tasks.selectors import journal_page

    t = submit("t.untrusted")
    run()
    assert Task.objects.get(id=t).status == states.COMPLETED
    journal = {s.name: s.untrusted for s in journal_page(task=t)}
    assert journal == {"reply": True, "fetch": True}
    [effect] = effect_page(task=t, tenant="acme")
    assert effect.untrusted
    # A step of the agent's own code is not.
    t2 = submit("t.steps", {"n": 1})
    run()
    assert not any(s.untrusted for s in journal_page(task=t2))


def test_the_cli_shows_why_a_task_is_blocked_and_what_releases_it():
    from tests.runtime.test_cli import steward

    t = submit("t.requires")
    run()
    decision = Task.objects.get(id=t).blocked_decision_id
    out = steward("show", str(t))
    assert f"blocked  authority_denied, decision {decision} (change the grants, then resume)" in out
    assert "denied at worker: no_grant_agent" in out
