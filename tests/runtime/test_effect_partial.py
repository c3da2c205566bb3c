"""A `partial` effect (runtime/effects/ledger.py Cut): a boundary cut the call after part
of the answer came. The ledger records it, with what came, before the denial blocks the
task; a resumed attempt sends a re-sendable one again under its key, and turns any other
into `unknown` for a person, never sending it again by itself. In-process, no gateway."""

from __future__ import annotations

import pytest

from runtime import encoding, states
from runtime.agents import agent
from runtime.authz.services import authorize, raise_if_denied
from runtime.effects import ledger
from runtime.errors import AuthorityDenied
from runtime.models import AuditEvent, Effect, Step, Task
from runtime.tasks.services import task_resume
from tests.runtime.inprocess import run, submit

calls: list = []  # the key of each call the effect function received


@pytest.fixture(autouse=True)
def _fresh():
    calls.clear()


def cut_once(task_id, *, idempotency_key):
    """Answers in full, except the first time: then it is cut midway by a denial."""
    calls.append(idempotency_key)
    if len(calls) == 1:
        decision = authorize(task=task_id, action="model.call", resource="model:fake-1", boundary="credential_gateway")
        try:
            raise_if_denied(decision)
        except AuthorityDenied as denial:
            raise ledger.Cut(
                denial, receipt={"cut": "AUTHZ_REVOKED", "chunks": 3, "text_length": 11, "denial": denial.decision_id}
            ) from None
    return {"text": "all of it"}


@agent("t.cut_once")
def cut_once_agent(ctx, input):
    return ctx.effect("answer", cut_once, str(ctx.task_id), effect_class=input["effect_class"], keyed=input["keyed"])


def cut(effect_class: str, keyed: bool):
    task_id = submit("t.cut_once", {"effect_class": effect_class, "keyed": keyed})
    run()
    task = Task.objects.get(id=task_id)
    assert (task.status, task.blocked_reason) == (states.BLOCKED, states.AUTHORITY_DENIED)
    effect = Effect.objects.get(task_id=task_id)
    assert (effect.state, effect.sends, effect.epoch) == (states.PARTIAL, 1, 1)
    assert effect.receipt["chunks"] == 3 and effect.receipt["denial"] == str(task.blocked_decision_id)
    event = AuditEvent.objects.get(task_id=task_id, kind="effect.partial")
    assert event.data["receipt_digest"] == encoding.digest(effect.receipt)  # a digest: no payload in the trail
    assert event.data["denial"] == effect.receipt["denial"]
    assert not Step.objects.filter(task_id=task_id, kind="effect").exists()
    return task_id, effect


def test_a_cut_call_is_recorded_partial_and_a_resume_sends_an_idempotent_one_again_under_its_key(live):
    task_id, effect = cut(states.IDEMPOTENT, keyed=True)
    partial = effect.receipt
    task_resume(task_id=task_id, actor="user:alice", note="granted again")
    run()
    task = Task.objects.get(id=task_id)
    assert task.status == states.COMPLETED and task.output == {"text": "all of it"}
    assert calls == [effect.key, effect.key]
    effect.refresh_from_db()
    assert (effect.state, effect.sends, effect.epoch, effect.receipt) == (states.COMMITTED, 2, 2, {"text": "all of it"})
    resent = AuditEvent.objects.get(task_id=task_id, kind="effect.resent")
    assert (resent.data["partial_digest"], resent.data["previous_epoch"]) == (encoding.digest(partial), 1)


def test_a_cut_irreversible_call_becomes_unknown_on_resume_and_is_not_sent_again(live):
    task_id, effect = cut(states.IRREVERSIBLE, keyed=False)
    task_resume(task_id=task_id, actor="user:alice", note="granted again")
    run()
    task = Task.objects.get(id=task_id)
    assert (task.status, task.blocked_reason) == (states.BLOCKED, states.EFFECT_UNKNOWN)
    assert calls == [effect.key]
    effect.refresh_from_db()
    assert effect.state == states.UNKNOWN
    assert AuditEvent.objects.filter(task_id=task_id, kind="effect.unknown").count() == 1
