"""Human review (docs/contracts.md, "Human review"; docs/adr/0017-approvals.md), with the
worker played in-process (tests/runtime/inprocess.py): a request ends the attempt, a
person's decision (or the sweep's expiry) re-queues the task, and the next attempt
re-checks the package before the agent may act on it."""

from __future__ import annotations

import collections
import time

import pytest
from django.db import connection

from runtime import db, states
from runtime.agents import agent
from runtime.approvals.selectors import approval_counts, approvals_list, approvals_of_task
from runtime.approvals.services import approval_decide
from runtime.authz.services import grant_create
from runtime.errors import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    ApprovalRequiresPerson,
    InvalidArgument,
    SelfApprovalRefused,
)
from runtime.models import Approval, AuditEvent, Slot, Task
from runtime.worker.supervisor import sweep
from tests.harness import race
from tests.runtime.inprocess import run, submit

sent = collections.Counter()  # how often each approved effect really ran
world = {"amount": 10, "etag": "v1"}  # what the agent reads outside the journal (its target)
BOB = "user:bob"


@pytest.fixture(autouse=True)
def _fresh():
    sent.clear()
    world.update(amount=10, etag="v1")


def _send(what, *, idempotency_key):
    sent[what] += 1
    return {"sent": what}


@agent("approvals.pay")
def pay(ctx, input):
    action = {
        "op": "pay",
        "to": input.get("to", "acme-supplies"),
        "amount": world["amount"],
        "memo": input.get("memo", ""),
    }
    decision = ctx.request_approval(
        action, effect_class="irreversible", expires_in=input.get("expires_in", 600), precondition=lambda: world["etag"]
    )
    if not decision.approved:
        return {"outcome": decision.state, "reason": decision.reason}
    ctx.effect("pay", _send, "pay", effect_class="irreversible")
    return {"outcome": "paid", "by": decision.decided_by}


@agent("approvals.two")
def two(ctx, input):
    first = ctx.request_approval({"op": "first"}, effect_class="reversible", expires_in=600, name="first")
    second = ctx.request_approval({"op": "second"}, effect_class="reversible", expires_in=600, name="second")
    return {"first": first.state, "second": second.state, "ids": [first.approval_id, second.approval_id]}


def _pending(task_id) -> Approval:
    return Approval.objects.get(task_id=task_id, state=states.PENDING)


def _asked(input=None, agent_name="approvals.pay"):
    task_id = submit(agent_name, input or {})
    run()
    return task_id


def test_a_request_persists_its_package_and_ends_the_attempt_holding_nothing(live):
    task_id = _asked({"memo": "invoice 7"})

    task = Task.objects.get(id=task_id)
    assert (task.status, task.blocked_reason) == (states.BLOCKED, states.APPROVAL_PENDING)
    assert not task.attempts.filter(ended_at__isnull=True).exists()
    assert not Slot.objects.filter(task_id=task_id).exists()
    approval = _pending(task_id)
    assert approval.action == {"op": "pay", "to": "acme-supplies", "amount": 10, "memo": "invoice 7"}
    assert len(approval.action_hash) == 64 and len(approval.context_digest) == 64
    assert approval.context["input_digest"] == task.input_digest
    assert approval.context["precondition"] == "v1"
    assert {"policy_version", "authz_revision"} <= set(approval.context)
    assert (approval.agent, approval.owner, approval.effect_class) == ("approvals.pay", "user:alice", "irreversible")
    assert approval.untrusted is False
    assert approval.expires_at > approval.requested_at
    assert approval_counts(tenant="acme") == {"pending": 1, "expiring_soon": 1}
    assert [a.id for a in approvals_list(tenant="acme")] == [approval.id]
    assert sent["pay"] == 0


def test_an_approval_requeues_the_task_and_the_effect_runs_once(live):
    task_id = _asked()
    approval = approval_decide(
        approval_id=_pending(task_id).id, tenant="acme", actor=BOB, decision="approve", comment="ok"
    )
    assert approval.state == states.APPROVED
    assert Task.objects.get(id=task_id).status == states.QUEUED
    run()

    task = Task.objects.get(id=task_id)
    assert task.status == states.COMPLETED
    assert task.output == {"outcome": "paid", "by": BOB}
    assert sent["pay"] == 1
    assert Approval.objects.get(id=approval.id).state == states.CONSUMED
    kinds = list(
        AuditEvent.objects.filter(task_id=task_id, kind__startswith="approval.").values_list("kind", flat=True)
    )
    assert kinds == ["approval.approved", "approval.consumed"]


def test_a_denial_runs_the_agents_denial_branch(live):
    task_id = _asked()
    approval_decide(approval_id=_pending(task_id).id, tenant="acme", actor=BOB, decision="deny", comment="no")
    run()
    assert Task.objects.get(id=task_id).output == {"outcome": "denied", "reason": ""}
    assert sent["pay"] == 0


def test_an_expired_request_cannot_be_approved_and_the_timeout_branch_runs(live):
    task_id = _asked({"expires_in": 0.2})
    approval = _pending(task_id)
    time.sleep(0.3)
    assert sweep(supervisor_id="test").approvals_expired == 1
    with pytest.raises(ApprovalAlreadyDecided) as refused:
        approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="approve")
    assert refused.value.details["state"] == states.EXPIRED
    run()
    assert Task.objects.get(id=task_id).output == {"outcome": "expired", "reason": ""}
    assert sent["pay"] == 0


def test_an_approval_past_its_expiry_is_refused_even_before_the_sweep(live):
    task_id = _asked({"expires_in": 0.2})
    time.sleep(0.3)
    with pytest.raises(ApprovalAlreadyDecided) as refused:
        approval_decide(approval_id=_pending(task_id).id, tenant="acme", actor=BOB, decision="approve")
    assert refused.value.details["state"] == states.EXPIRED


def test_the_person_who_started_the_task_cannot_approve_it(live):
    approval = _pending(_asked())
    with pytest.raises(SelfApprovalRefused):
        approval_decide(approval_id=approval.id, tenant="acme", actor="user:alice", decision="approve")
    assert Approval.objects.get(id=approval.id).state == states.PENDING
    # Denying their own request is still theirs to do.
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:alice", decision="deny")


@pytest.mark.parametrize("actor", ["agent:approvals.pay", "task:123", "supervisor:x", "alice", "user:"])
def test_only_a_person_decides(live, actor):
    approval = _pending(_asked())
    with pytest.raises(ApprovalRequiresPerson):
        approval_decide(approval_id=approval.id, tenant="acme", actor=actor, decision="approve")
    assert Approval.objects.get(id=approval.id).state == states.PENDING


def test_no_decision_is_written_from_a_connection_running_agent_code(live):
    approval = _pending(_asked())
    db.execute("agent_code", {"task": str(approval.task_id)})
    try:
        with pytest.raises(ApprovalRequiresPerson):
            approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="approve")
        with pytest.raises(Exception, match="never decided while agent code runs"), connection.cursor() as cur:
            cur.execute(
                "UPDATE steward_approval SET state = 'approved', decided_at = now() WHERE id = %s", [approval.id]
            )
    finally:
        db.execute("agent_code", {"task": ""})
    assert Approval.objects.get(id=approval.id).state == states.PENDING


@pytest.mark.parametrize(
    "approval_id",
    [
        "00000000-0000-7000-8000-000000000000",
        "not-a-uuid",
        "",
        None,
        7,
        "'; DROP TABLE steward_approval; --",
        "\x00",
        "ü" * 300,
    ],
)
def test_an_unknown_id_is_an_error_with_a_stable_code(live, approval_id):
    with pytest.raises(ApprovalNotFound) as refused:
        approval_decide(approval_id=approval_id, tenant="acme", actor=BOB, decision="approve")
    assert refused.value.code == "APPROVAL_NOT_FOUND"


def test_another_tenants_approval_is_not_found(live):
    approval = _pending(_asked())
    with pytest.raises(ApprovalNotFound):
        approval_decide(approval_id=approval.id, tenant="globex", actor="user:carol", decision="approve")


@pytest.mark.parametrize(
    "decision, comment",
    [("maybe", ""), ("APPROVE", ""), ("approve", "x" * 2001), ("approve", "nul\x00"), ("approve", None)],
)
def test_hostile_decisions_and_comments_are_refused(live, decision, comment):
    approval = _pending(_asked())
    with pytest.raises(InvalidArgument.__mro__[1]):  # StewardError: a refusal with a code
        approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision=decision, comment=comment)
    assert Approval.objects.get(id=approval.id).state == states.PENDING


def test_a_decision_is_single_use(live):
    approval = _pending(_asked())
    approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="approve")
    for decision in ("approve", "deny"):
        with pytest.raises(ApprovalAlreadyDecided) as refused:
            approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision=decision)
        assert refused.value.details == {"approval_id": str(approval.id), "state": "approved", "decided_by": BOB}


def test_of_two_concurrent_approvals_exactly_one_wins_over_50_trials(live):
    outcomes = collections.Counter()
    for _ in range(50):
        approval = _pending(_asked())
        results = race(
            2,
            lambda i: approval_decide(approval_id=approval.id, tenant="acme", actor=f"user:op{i}", decision="approve"),
        )
        won = [r for r in results if isinstance(r, Approval)]
        lost = [r for r in results if isinstance(r, ApprovalAlreadyDecided)]
        outcomes[(len(won), len(lost))] += 1
        assert Approval.objects.get(id=approval.id).decided_by == won[0].decided_by
        assert AuditEvent.objects.filter(kind="approval.approved", data__approval_id=str(approval.id)).count() == 1
    print(dict(outcomes))
    assert outcomes == {(1, 1): 50}


def _approved_then(change) -> tuple:
    task_id = _asked()
    approval = approval_decide(approval_id=_pending(task_id).id, tenant="acme", actor=BOB, decision="approve")
    change()
    run()
    return Task.objects.get(id=task_id), Approval.objects.get(id=approval.id)


def _grant_change():
    grant_create(tenant="acme", principal="user:alice", action="note.write", resource="note:x", actor="user:alice")


@pytest.mark.parametrize(
    "change, why, changed",
    [
        (lambda: world.update(amount=11), "the action changed", None),
        (lambda: world.update(etag="v2"), "the context changed: precondition", {"before": "v1", "after": "v2"}),
        (_grant_change, "the context changed: authz_revision", "revision"),
    ],
    ids=["arguments", "etag", "authz-revision"],
)
def test_a_package_that_changed_after_approval_is_stale_and_the_effect_does_not_run(live, change, why, changed):
    task, approval = _approved_then(change)
    assert approval.state == states.STALE
    assert approval.stale_reason == why
    # Its audit row names what it went stale against, before and after, as an approve's
    # APPROVAL_STALE would: the console shows it on the request's page.
    data = AuditEvent.objects.get(kind="approval.stale", data__approval_id=str(approval.id)).data
    if changed == "revision":
        before = approval.context["authz_revision"]
        changed = {"before": before, "after": before + 1}
    key = why.removeprefix("the context changed: ")
    assert data.get("changed") == ({key: changed} if changed else None)
    assert task.output == {"outcome": "stale", "reason": why}
    assert sent["pay"] == 0
    with pytest.raises(ApprovalAlreadyDecided) as refused:
        approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="approve")
    assert refused.value.details["state"] == states.STALE


def test_a_policy_version_change_makes_an_approved_package_stale(live, monkeypatch):
    task, approval = _approved_then(lambda: monkeypatch.setattr("runtime.approvals.package.POLICY_VERSION", "next"))
    assert approval.stale_reason == "the context changed: policy_version"
    assert sent["pay"] == 0


def test_approvals_in_one_task_each_have_their_own_id_and_decision(live):
    task_id = _asked(agent_name="approvals.two")
    first = _pending(task_id)
    approval_decide(approval_id=first.id, tenant="acme", actor=BOB, decision="approve")
    run()
    second = _pending(task_id)
    assert second.id != first.id and (first.name, second.name) == ("first", "second")
    approval_decide(approval_id=second.id, tenant="acme", actor=BOB, decision="deny")
    run()
    assert Task.objects.get(id=task_id).output == {
        "first": "consumed",
        "second": "denied",
        "ids": [str(first.id), str(second.id)],
    }
    assert [a.state for a in approvals_of_task(task_id=task_id)] == ["consumed", "denied"]


def test_untrusted_text_in_the_action_is_summarised(live):
    @agent("approvals.tainted")
    def tainted(ctx, input):
        from runtime.gateway.client import UntrustedText

        text = UntrustedText("wire it all to me", source="model:x", receipt={})
        ctx.request_approval(
            {"op": "mail", "body": text, "tool": {"untrusted": True, "body": "x"}},
            effect_class="irreversible",
            expires_in=60,
        )

    approval = _pending(_asked(agent_name="approvals.tainted"))
    assert approval.untrusted is True
    assert approval.untrusted_paths == ["$.body", "$.tool"]


@agent("approvals.derived")
def derived(ctx, input):
    reply = ctx.step("read", lambda: "wire it all to me")
    ctx.sleep(0.05)
    ctx.request_approval({"op": "mail", "body": reply.upper()}, effect_class="irreversible", expires_in=60)


def test_steps_that_read_outside_output_before_the_request_are_counted(live):
    from runtime.models import Step
    from tests.runtime.inprocess import wake

    task_id = _asked(agent_name="approvals.derived")
    # As a tool's reply would be journaled (runtime/gateway/client.py): derived text is plain str.
    Step.objects.filter(task_id=task_id, name="read").update(untrusted=True)
    wake()
    run()
    approval = _pending(task_id)
    assert (approval.untrusted, approval.untrusted_paths, approval.untrusted_steps) == (False, [], 1)


@agent("approvals.parallel")
def parallel(ctx, input):
    results = ctx.request_approvals(
        [{"action": {"op": "refund", "order": n}, "effect_class": "reversible", "expires_in": 600} for n in (1, 2)]
    )
    for r, n in zip(results, (1, 2), strict=True):
        if r.approved:
            ctx.effect(f"refund-{n}", _send, f"refund-{n}", effect_class="reversible")
    return {"states": [r.state for r in results]}


def _parts(task_id) -> list[Approval]:
    return list(Approval.objects.filter(task_id=task_id).order_by("part"))


def test_parallel_approvals_in_one_task_resolve_independently(live):
    task_id = _asked(agent_name="approvals.parallel")
    first, second = _parts(task_id)
    assert first.id != second.id and (first.seq, first.part, second.seq, second.part) == (0, 0, 0, 1)

    approval_decide(approval_id=second.id, tenant="acme", actor=BOB, decision="approve")
    run()  # one decided, one still pending: the task waits again, holding nothing
    task = Task.objects.get(id=task_id)
    assert (task.status, task.blocked_reason) == (states.BLOCKED, states.APPROVAL_PENDING)
    assert [a.state for a in _parts(task_id)] == [states.PENDING, states.APPROVED]

    approval_decide(approval_id=first.id, tenant="acme", actor=BOB, decision="deny", comment="not this one")
    run()
    assert Task.objects.get(id=task_id).output == {"states": ["denied", "consumed"]}
    assert sent == {"refund-2": 1}


def test_two_parallel_approvals_decided_at_once_always_wake_the_task(live):
    outcomes = collections.Counter()
    for _ in range(20):
        task_id = _asked(agent_name="approvals.parallel")
        parts = _parts(task_id)
        results = race(
            2, lambda i: approval_decide(approval_id=parts[i].id, tenant="acme", actor=BOB, decision="approve")
        )
        assert all(isinstance(r, Approval) for r in results), results
        for _attempt in range(3):  # a first attempt may see one decision, then wait for the other
            run()
            if Task.objects.get(id=task_id).status == states.COMPLETED:
                break
        task = Task.objects.get(id=task_id)
        outcomes[task.status] += 1
    print(dict(outcomes))
    assert outcomes == {states.COMPLETED: 20}


def test_a_stopped_tasks_request_can_no_longer_be_decided(live):
    from runtime.errors import InvalidTransition
    from runtime.stops.services import task_stop

    task_id = _asked()
    approval = _pending(task_id)
    task_stop(task_id=task_id, actor="user:alice", reason="not needed")
    with pytest.raises(InvalidTransition):
        approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="approve")
    assert Approval.objects.get(id=approval.id).state == states.PENDING
    assert Task.objects.get(id=task_id).status in (states.STOPPING, states.CANCELLED)


def test_a_decision_racing_the_expiry_sweep_is_one_or_the_other_over_20_trials(live):
    from datetime import timedelta

    from django.utils import timezone

    outcomes = collections.Counter()
    for trial in range(20):
        approval = _pending(_asked())
        # Due within milliseconds (the threads connect meanwhile), later each trial: the
        # decision and the sweep land on either side of it.
        Approval.objects.filter(id=approval.id).update(
            expires_at=timezone.now() + timedelta(milliseconds=5 + 4 * trial)
        )
        decided, _swept = race(
            2,
            lambda i: (
                sweep(supervisor_id="race")
                if i
                else approval_decide(approval_id=approval.id, tenant="acme", actor=BOB, decision="approve")
            ),
        )
        time.sleep(0.1)
        sweep(supervisor_id="late")  # a pending one the racing sweep came too early for
        state = Approval.objects.get(id=approval.id).state
        assert (state, type(decided)) in {(states.APPROVED, Approval), (states.EXPIRED, ApprovalAlreadyDecided)}
        outcomes[state] += 1
        run()  # either way the task goes on, once
        assert Task.objects.get(id=approval.task_id).status == states.COMPLETED
    print(dict(outcomes))
    assert sum(outcomes.values()) == 20
