"""The effect ledger protocol (docs/contracts.md §1 "External effects";
docs/adr/0006-effect-recovery.md): commit the intent, call with the key, commit the receipt; on recovery
re-send under the same key or mark the effect `unknown` for an operator.

In-process against the real HTTP fake service. A worker death is simulated by raising
WorkerDied (a BaseException, so nothing in the runtime handles it) at a fault point:
the attempt stops dead, its lease lapses, and the supervisor recovers the task.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from runtime import faults, states
from runtime.agents import agent
from runtime.effects.services import effect_resolve
from runtime.errors import EffectFailed, InvalidTransition
from runtime.models import Attempt, AuditEvent, Effect, Slot, Step, Task
from runtime.worker.supervisor import sweep
from tests.agents import submit as submit_to_service
from tests.conftest import database_url
from tests.runtime.inprocess import NAP, recover, run, submit, wake

seen: list = []  # what agent code observed, attempt by attempt


@pytest.fixture(autouse=True)
def _fresh():
    seen.clear()


class WorkerDied(BaseException):
    """Stands in for SIGKILL: nothing after this point of the attempt runs."""


@pytest.fixture
def die_at(monkeypatch):
    """die_at(point): the next attempt to reach `point` dies there; later ones pass."""

    def arm(point: str) -> None:
        real, fired = faults.reach, []

        def reach(at, **where):
            if at == point and not fired:
                fired.append(where)
                raise WorkerDied(at)
            real(at, **where)

        monkeypatch.setattr(faults, "reach", reach)

    return arm


def dies_then_recovers(task_id) -> None:
    """The first attempt dies at the armed point, leaving its lease to lapse; the
    supervisor recovers the task and the next attempt runs."""
    with pytest.raises(WorkerDied):
        run()
    recover(task_id)
    run()


def effect_task(fake, effect_class: str, *, keyed: bool) -> object:
    """t.effect: step `prepare` (seq 0), effect `submit` (seq 1), step `after`."""
    return submit("t.effect", {"url": fake.url, "effect_class": effect_class, "keyed": keyed})


def audit_kinds(task_id) -> list[str]:
    return list(AuditEvent.objects.filter(task_id=task_id).order_by("chain_seq").values_list("kind", flat=True))


def keys_sent(fake) -> list:
    return [c["key"] for c in fake.calls()]


def blocked_on_unknown(fake, agent_name="t.effect") -> tuple[object, Effect]:
    """A task blocked on an irreversible keyed effect whose answer was lost (the service
    performed it): the state an operator is asked to resolve."""
    fake.push("drop")
    task_id = submit(agent_name, {"url": fake.url, "effect_class": "irreversible", "keyed": True})
    run()
    assert Task.objects.get(id=task_id).status == states.BLOCKED
    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.sends, fake.performed_count()) == (states.UNKNOWN, 1, 1)
    return task_id, effect


# --- agents ----------------------------------------------------------------------------


def observe_then_submit(url, *, idempotency_key):
    """Look at the ledger from another connection (another process would see the same)
    at the moment of the call, then make it."""
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as other:
        row = other.execute(
            "SELECT state, sends, epoch FROM steward_effect WHERE key = %s", (idempotency_key,)
        ).fetchone()
        audited = other.execute(
            "SELECT kind FROM steward_audit WHERE data->>'key' = %s ORDER BY id", (idempotency_key,)
        ).fetchall()
    seen.append({"ledger": row, "audit": [kind for (kind,) in audited]})
    return submit_to_service(url, {"observed": True}, idempotency_key=idempotency_key)


@agent("effects.observed")
def observed_agent(ctx, input):
    return ctx.effect("submit", observe_then_submit, input["url"], effect_class="reversible", keyed=True)


@agent("effects.catching")
def catching_agent(ctx, input):
    try:
        receipt = ctx.effect(
            "submit",
            submit_to_service,
            input["url"],
            {"task": str(ctx.task_id)},
            effect_class=input["effect_class"],
            keyed=input["keyed"],
        )
    except EffectFailed as exc:
        seen.append((ctx.epoch, type(exc).__name__, exc.error_type, exc.message))
        receipt = None
    ctx.sleep(NAP)
    return {"receipt": receipt}


@agent("effects.drifting")
def drifting_agent(ctx, input):
    """Asks for a different request on each attempt: code that does not replay."""
    return ctx.effect(
        "submit", submit_to_service, input["url"], {"attempt": ctx.epoch}, effect_class="reversible", keyed=True
    )


@agent("effects.unstorable_request")
def unstorable_request_agent(ctx, input):
    try:
        ctx.effect("submit", submit_to_service, input["url"], {"ids": {1, 2}}, effect_class="read")
    except Exception:
        seen.append("swallowed")
    return {}


# --- the protocol ----------------------------------------------------------------------


def test_the_intent_is_committed_before_the_call_and_the_call_carries_the_derived_key(live, fake):
    task_id = submit("effects.observed", {"url": fake.url})

    run()

    effect = Effect.objects.get(task_id=task_id)
    assert effect.key == f"{task_id}/0/submit"
    # At the moment of the call another connection already saw the committed intent.
    assert seen == [{"ledger": (states.INTENT, 1, 1), "audit": ["effect.intent"]}]
    (sent,) = fake.calls()
    assert (sent["key"], sent["outcome"]) == (effect.key, "performed")
    task = Task.objects.get(id=task_id)
    assert task.status == states.COMPLETED
    assert task.output == effect.receipt == {"op_id": sent["op_id"], "key": effect.key, "deduplicated": False}
    assert (effect.state, effect.sends, effect.effect_class, effect.keyed) == (
        states.COMMITTED,
        1,
        states.REVERSIBLE,
        True,
    )
    # Provenance: the task, the attempt and the step that made it.
    assert effect.attempt == Attempt.objects.get(task_id=task_id, epoch=1)
    assert (effect.step_seq, effect.epoch) == (0, 1)
    assert Step.objects.get(task_id=task_id, seq=0).output == effect.receipt
    kinds = audit_kinds(task_id)
    assert kinds.index("effect.intent") < kinds.index("effect.committed") < kinds.index("task.completed")


def test_a_service_refusal_fails_the_effect_and_replay_raises_it_again_without_a_call(live, fake):
    fake.push("fail")
    task_id = submit("effects.catching", {"url": fake.url, "effect_class": "reversible", "keyed": True})

    run()
    wake()
    run()

    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.error["type"]) == (states.EFFECT_FAILED, "EffectNotApplied")
    assert len(fake.calls()) == 1 and fake.performed_count() == 0
    (first, replayed) = seen
    assert first[:3] == (1, "EffectFailed", "EffectNotApplied") and "HTTP 503" in first[3]
    assert replayed == (2, *first[1:])
    assert Task.objects.get(id=task_id).status == states.COMPLETED
    assert "effect.failed" in audit_kinds(task_id)


def test_an_uncaught_effect_failure_fails_the_task_with_effect_failed(live, fake):
    fake.push("fail")
    task_id = effect_task(fake, states.REVERSIBLE, keyed=True)

    run()

    task = Task.objects.get(id=task_id)
    assert task.status == states.FAILED
    assert (task.error["code"], task.error["type"], task.error["step"]) == (
        "EFFECT_FAILED",
        "EffectNotApplied",
        "submit",
    )


def test_an_effect_whose_request_is_not_json_fails_the_task_before_anything_is_recorded_or_sent(live, fake):
    task_id = submit("effects.unstorable_request", {"url": fake.url})

    run()

    task = Task.objects.get(id=task_id)
    assert (task.status, task.error["code"]) == (states.FAILED, "NOT_JOURNALABLE")
    assert "effect 'submit' arguments must be JSON" in task.error["message"]
    assert seen == [] and fake.calls() == []
    assert not Effect.objects.filter(task_id=task_id).exists()
    assert not Step.objects.filter(task_id=task_id).exists()


def test_a_lost_answer_from_an_unkeyed_irreversible_effect_becomes_unknown_and_blocks_the_task(live, fake):
    fake.set_mode("unkeyed")
    fake.push("drop")
    task_id = effect_task(fake, states.IRREVERSIBLE, keyed=False)

    run()

    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.sends) == (states.UNKNOWN, 1)
    task = Task.objects.get(id=task_id)
    assert task.status == states.BLOCKED and f"#{effect.id}" in task.status_note
    assert len(fake.calls()) == 1 and fake.performed_count() == 1
    assert Attempt.objects.get(task_id=task_id).end_reason == "block"
    assert not Slot.objects.filter(task_id=task_id).exists()
    assert audit_kinds(task_id)[-2:] == ["effect.unknown", "task.blocked"]
    # Nothing but an operator moves it: sweeps and workers leave it alone.
    sweep(supervisor_id="test")
    assert run() == 0
    assert len(fake.calls()) == 1 and Task.objects.get(id=task_id).status == states.BLOCKED


def test_a_lost_answer_from_a_keyed_reversible_effect_is_resent_under_the_same_key(live, fake):
    fake.push("drop")
    task_id = effect_task(fake, states.REVERSIBLE, keyed=True)

    run()

    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.sends) == (states.COMMITTED, 2)
    assert keys_sent(fake) == [effect.key, effect.key]
    assert [c["outcome"] for c in fake.calls()] == ["performed", "deduplicated"]
    assert fake.performed_count() == 1
    assert effect.receipt == {"op_id": fake.calls()[0]["op_id"], "key": effect.key, "deduplicated": True}
    resent = AuditEvent.objects.get(task_id=task_id, kind="effect.resent")
    assert resent.data["approved_by"] is None and resent.data["effect"] == effect.id
    assert Task.objects.get(id=task_id).status == states.COMPLETED


# --- recovery after a worker death ---------------------------------------------------------


def test_a_keyed_reversible_effect_cut_off_by_a_worker_death_is_resent_on_recovery(live, fake, die_at):
    die_at(faults.AFTER_EFFECT_BEFORE_RECEIPT)
    task_id = effect_task(fake, states.REVERSIBLE, keyed=True)

    dies_then_recovers(task_id)

    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.sends, effect.epoch) == (states.COMMITTED, 2, 2)
    assert keys_sent(fake) == [effect.key, effect.key] and fake.performed_count() == 1
    assert effect.attempt == Attempt.objects.get(task_id=task_id, epoch=2, reason=states.RECOVERY)
    assert [k for k in audit_kinds(task_id) if k.startswith("effect.")] == [
        "effect.intent",
        "effect.resent",
        "effect.committed",
    ]
    assert Task.objects.get(id=task_id).status == states.COMPLETED


def test_an_irreversible_effect_cut_off_by_a_worker_death_becomes_unknown_and_is_never_resent(live, fake, die_at):
    die_at(faults.AFTER_EFFECT_BEFORE_RECEIPT)
    task_id = effect_task(fake, states.IRREVERSIBLE, keyed=True)  # keyed, and still not re-sent

    dies_then_recovers(task_id)

    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.sends) == (states.UNKNOWN, 1)
    assert Task.objects.get(id=task_id).status == states.BLOCKED
    assert len(fake.calls()) == 1
    sweep(supervisor_id="test")
    run()
    assert len(fake.calls()) == 1


def test_an_effect_whose_receipt_was_committed_before_a_worker_death_is_not_sent_again(live, fake, die_at):
    die_at(faults.AFTER_RECEIPT_BEFORE_JOURNAL)
    task_id = effect_task(fake, states.IRREVERSIBLE, keyed=False)

    dies_then_recovers(task_id)

    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.sends) == (states.COMMITTED, 1)
    assert len(fake.calls()) == 1
    task = Task.objects.get(id=task_id)
    assert (task.status, task.output) == (states.COMPLETED, {"receipt": effect.receipt})


def test_a_replayed_effect_asking_for_a_different_request_fails_the_task_with_nondeterminism(live, fake, die_at):
    die_at(faults.AFTER_EFFECT_BEFORE_RECEIPT)
    task_id = submit("effects.drifting", {"url": fake.url})

    dies_then_recovers(task_id)

    task = Task.objects.get(id=task_id)
    assert (task.status, task.error["code"]) == (states.FAILED, "NONDETERMINISM")
    assert "effect 'submit'" in task.error["message"] and "different request" in task.error["message"]
    assert len(fake.calls()) == 1  # the drifted request was never sent
    assert Effect.objects.get(task_id=task_id).sends == 1


# --- operator resolutions ----------------------------------------------------------------


def test_resolving_an_unknown_effect_as_committed_completes_the_task_with_the_given_receipt(live, fake):
    task_id, effect = blocked_on_unknown(fake)

    resolved = effect_resolve(
        effect_id=effect.id,
        outcome="committed",
        actor="user:alice",
        receipt={"op_id": "checked-by-hand"},
        note="saw it in their console",
    )
    assert (resolved.state, resolved.resolved_by) == (states.COMMITTED, "user:alice")
    assert Task.objects.get(id=task_id).status == states.QUEUED
    run()

    task = Task.objects.get(id=task_id)
    assert (task.status, task.output) == (states.COMPLETED, {"receipt": {"op_id": "checked-by-hand"}})
    assert len(fake.calls()) == 1
    assert Attempt.objects.get(task_id=task_id, epoch=2).reason == states.RESUME
    resolved_event = AuditEvent.objects.get(task_id=task_id, kind="effect.resolved")
    assert (resolved_event.actor, resolved_event.data["outcome"]) == ("user:alice", "committed")
    assert AuditEvent.objects.get(task_id=task_id, kind="task.unblocked").actor == "user:alice"


def test_resolving_an_unknown_effect_as_failed_makes_the_agent_see_effect_failed(live, fake):
    task_id, effect = blocked_on_unknown(fake, "effects.catching")

    effect_resolve(effect_id=effect.id, outcome="failed", actor="user:alice", note="not on their side")
    run()
    wake()
    run()

    assert seen == [
        (2, "EffectFailed", "ResolvedAsNotApplied", "not on their side"),
        (3, "EffectFailed", "ResolvedAsNotApplied", "not on their side"),
    ]
    assert Effect.objects.get(id=effect.id).state == states.EFFECT_FAILED
    assert len(fake.calls()) == 1
    task = Task.objects.get(id=task_id)
    assert (task.status, task.output) == (states.COMPLETED, {"receipt": None})


def test_resolving_an_unknown_effect_as_retry_resends_it_once_under_the_same_key(live, fake):
    task_id, effect = blocked_on_unknown(fake)

    retried = effect_resolve(effect_id=effect.id, outcome="retry", actor="user:alice")
    assert (retried.state, retried.resend_approved) == (states.INTENT, True)
    run()

    effect.refresh_from_db()
    assert (effect.state, effect.sends, effect.resend_approved) == (states.COMMITTED, 2, False)
    assert keys_sent(fake) == [effect.key, effect.key]
    assert fake.performed_count() == 1  # the service deduplicated the re-send
    resent = AuditEvent.objects.get(task_id=task_id, kind="effect.resent")
    assert (resent.data["approved_by"], resent.data["previous_epoch"], resent.data["epoch"]) == ("user:alice", 1, 2)
    assert Task.objects.get(id=task_id).status == states.COMPLETED


@pytest.mark.parametrize("outcome", ["committed", "failed", "retry"])
def test_resolving_an_effect_that_is_not_unknown_is_an_invalid_transition(live, fake, outcome):
    task_id = effect_task(fake, states.REVERSIBLE, keyed=True)
    run()
    effect = Effect.objects.get(task_id=task_id)
    assert effect.state == states.COMMITTED

    with pytest.raises(InvalidTransition):
        effect_resolve(effect_id=effect.id, outcome=outcome, actor="user:alice")

    after = Effect.objects.get(id=effect.id)
    assert (after.state, after.receipt, after.resolved_by) == (states.COMMITTED, effect.receipt, "")
    assert not AuditEvent.objects.filter(task_id=task_id, kind="effect.resolved").exists()
