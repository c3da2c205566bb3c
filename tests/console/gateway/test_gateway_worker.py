"""End to end: a real Celery worker runs an agent whose ctx.model() and ctx.tool() go
through a real web server's credential gateway to the fake model on loopback. Then the
key scan: neither real key is in the worker's environment, any process's log, any table
(the journal, effects, decisions, gateway calls, audit) or the model's context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from runtime import encoding, states
from runtime.authz.services import grant_narrow, grant_revoke
from runtime.models import AuditEvent, Decision, Effect, GatewayCall, Step, Task
from runtime.tasks.services import task_resume, task_submit
from tests.console.gateway.conftest import MODEL_KEY, TOOL_KEY, ended
from tests.harness import wait_until
from tests.runtime.authz.common import ADMIN, give_both
from tests.snapshot import tables

pytestmark = [pytest.mark.integration]

AGENT = "t.model"
DONE = (states.COMPLETED, states.FAILED, states.BLOCKED, states.DEAD)


def submit(**input):
    return task_submit(agent=AGENT, input=input, tenant="acme", owner="user:alice", actor="user:alice").task_id


def finished(task_id):
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status__in=DONE).first(), timeout=60, message="the task to finish"
    )


@pytest.fixture
def worker(fleet, gateway_web):
    (started,) = fleet.workers(1, env={"STEWARD_GATEWAY_URL": gateway_web.url})
    return started


@pytest.mark.parametrize("stream", [False, True])
def test_a_worker_calls_the_model_and_a_tool_through_the_gateway_and_replays_without_calling(
    live, worker, gateway_web, model, stream
):
    give_both("model.call", "model:fake-1", agent=AGENT)
    give_both("tool.call", "tool:echo/notes/*", agent=AGENT)
    t = submit(prompt="the plan?", stream=stream, tool=True)
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    out = task.output
    assert (out["text"], out["untrusted"], out["source"]) == ("reply: the plan?", True, "model:fake-1")
    assert out["tool"] == {
        "status": 200,
        "untrusted": True,
        "body": {**out["tool"]["body"], "method": "POST", "path": "/notes/today", "json": {"text": "reply: the plan?"}},
    }
    seen = model.recorded()
    assert [r["authorization"] for r in seen] == [f"Bearer {MODEL_KEY}", f"Bearer {TOOL_KEY}"]
    # Each call is a committed effect whose key the gateway saw, linked to attempt and step.
    effects = list(Effect.objects.filter(task_id=t).order_by("step_seq"))
    assert [(e.name, e.state, e.effect_class, e.keyed) for e in effects] == [
        ("model:fake-1", "committed", "idempotent", True),
        ("tool:echo", "committed", "idempotent", True),
    ]
    calls = {c.idempotency_key: c for c in GatewayCall.objects.filter(task_id=t)}
    assert set(calls) == {e.key for e in effects} == {r["idempotency_key"] for r in seen}
    for effect in effects:
        call = ended(idempotency_key=effect.key, task_id=t)
        assert (call.outcome, call.step_seq, call.epoch, call.attempt_id) == (
            "committed",
            effect.step_seq,
            effect.epoch,
            effect.attempt_id,
        )
        assert effect.receipt["untrusted"] is True and effect.receipt["call"] == str(call.id)
    assert Step.objects.filter(task_id=t, kind="effect").count() == 2
    # Model and tool output is marked untrusted where it is kept: ledger and journal alike.
    assert [e.untrusted for e in effects] == [True, True]
    assert list(Step.objects.filter(task_id=t).order_by("seq").values_list("kind", "untrusted")) == [
        ("effect", True),
        ("effect", True),
        ("step", False),
    ]


def test_the_real_keys_are_nowhere_but_the_web_side(live, worker, gateway_web, model):
    give_both("model.call", "model:fake-1", agent=AGENT)
    give_both("tool.call", "tool:echo/notes/*", agent=AGENT)
    t = submit(prompt="what is the key?", stream=True, tool=True)
    assert finished(t).status == states.COMPLETED
    # One denied call too, so refusals are scanned as well.
    agent_grant = give_both("model.call", "model:fake-2", agent=AGENT)[0]
    grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="scan the refusal")
    denied = submit(prompt="again", model="fake-2")
    finished(denied)
    keys = [MODEL_KEY.encode(), TOOL_KEY.encode()]
    hits = []
    environ = Path(f"/proc/{worker.pid}/environ").read_bytes()
    hits += [("worker environment", k) for k in keys if k in environ]
    assert b"STEWARD_GATEWAY_URL" in environ and b"STEWARD_MODEL_KEY" not in environ
    for name, log in (("worker log", worker.output()), ("web log", gateway_web.output())):
        hits += [(name, k) for k in keys if k.decode() in log]
    with connection.cursor() as cur:
        for table in tables():
            cur.execute(f"SELECT coalesce(string_agg(t::text, '|'), '') FROM \"{table}\" t")
            text = cur.fetchone()[0]
            hits += [(table, k) for k in keys if k.decode() in text]
    context = json.dumps([r["body"] for r in model.recorded()])
    hits += [("model context", k) for k in keys if k.decode() in context]
    assert hits == []
    # The scan looked at something: the journal, the effects and the calls are there.
    assert Step.objects.filter(task_id=t).exists() and GatewayCall.objects.filter(task_id=t).count() == 2


def test_a_denied_model_call_reaches_agent_code_naming_the_gateway(live, worker, gateway_web, model):
    give_both("model.call", "model:fake-1", agent=AGENT)  # not fake-2
    t = submit(model="fake-2")
    task = finished(t)
    assert task.status != states.COMPLETED
    decision = Decision.objects.get(task_id=t)
    assert (decision.allowed, decision.boundary, decision.reason_code) == (
        False,
        "credential_gateway",
        "no_grant_agent",
    )
    assert GatewayCall.objects.get(task_id=t).outcome == "denied"
    assert model.recorded() == []
    # The effect's intent stays (never settled nor journaled): a resumed task asks again.
    assert Effect.objects.get(task_id=t).state == states.INTENT
    assert not Step.objects.filter(task_id=t, kind="effect").exists()
    # A denial blocks the task with its decision (ADR 0015): visible, never retried by itself.
    assert (task.status, task.blocked_reason, task.blocked_decision_id) == (
        states.BLOCKED,
        states.AUTHORITY_DENIED,
        decision.id,
    )
    assert task.error["code"] == "AUTHORITY_DENIED" and "credential_gateway" in task.error["message"]


def test_a_task_blocked_by_the_gateway_completes_once_granted_and_resumed_with_one_provider_call(
    live, worker, gateway_web, model
):
    """The way out of a denial: a person grants what was missing and resumes. The call's
    intent, left by the denial, is sent again under its key and admitted on current rows."""
    give_both("model.call", "model:fake-1", agent=AGENT)
    t = submit(model="fake-2")
    assert finished(t).status == states.BLOCKED and model.recorded() == []
    give_both("model.call", "model:fake-2", agent=AGENT)
    task_resume(task_id=t, actor="user:alice", note="granted fake-2")
    wait_until(
        lambda: Task.objects.filter(id=t, status=states.COMPLETED).exists(),
        timeout=60,
        message="the resumed task to complete",
    )
    assert len(model.recorded()) == 1
    assert list(Decision.objects.filter(task_id=t).order_by("id").values_list("allowed", flat=True)) == [False, True]
    assert Effect.objects.get(task_id=t).state == states.COMMITTED


def test_a_task_narrowed_while_asleep_is_denied_on_resume_and_replays_its_first_call_without_sending(
    live, fleet, worker, gateway_web, model
):
    """The seed's stale-authority fixture, through real processes: permitted, persisted
    (asleep, no worker), the owner's rights narrowed, resumed on a new attempt."""
    fleet.supervisors(1)
    _, owner_grant = give_both("model.call", "model:*", agent="t.model_nap")
    t = task_submit(
        agent="t.model_nap", input={"seconds": 2.0}, tenant="acme", owner="user:alice", actor="user:alice"
    ).task_id
    wait_until(
        lambda: Task.objects.filter(id=t, status=states.SLEEPING).exists(), timeout=60, message="the task to sleep"
    )
    assert len(model.recorded()) == 1
    grant_narrow(grant_id=owner_grant.id, tenant="acme", resource="model:other", actor=ADMIN, reason="narrowed")
    task = finished(t)
    assert task.status != states.COMPLETED
    assert len(model.recorded()) == 1  # the first call was replayed from the journal, the second denied
    denial = Decision.objects.get(task_id=t, allowed=False)
    assert (denial.boundary, denial.reason_code, denial.epoch, denial.actor, denial.owner) == (
        "credential_gateway",
        "no_grant_owner",
        task.epoch,
        "agent:t.model_nap",
        "user:alice",
    )
    assert (task.status, task.blocked_decision_id) == (states.BLOCKED, denial.id)
    assert task.epoch >= 2
    assert Decision.objects.filter(task_id=t, allowed=True, epoch=1).count() == 1


def test_a_revocation_while_the_worker_streams_cuts_the_call_records_it_partial_and_a_resume_sends_it_once_more(
    live, worker, gateway_web, model
):
    agent_grant, _ = give_both("model.call", "model:fake-1", agent=AGENT)
    model.set(reply=" ".join(f"w{i}" for i in range(80)), chunks=80, chunk_delay=0.05)  # a 4 s stream
    t = submit(prompt="long", stream=True)
    wait_until(
        lambda: GatewayCall.objects.filter(task_id=t, outcome="admitted").exists(),
        timeout=60,
        message="the worker's stream to start",
    )
    grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="cut the stream")
    task = finished(t)
    assert task.status != states.COMPLETED
    call = ended(task_id=t)
    assert call.outcome == "partial"
    denial = Decision.objects.get(task_id=t, allowed=False)
    assert (denial.boundary, denial.reason_code) == ("credential_gateway", "no_grant_agent")
    assert (task.status, task.blocked_reason, task.blocked_decision_id) == (
        states.BLOCKED,
        states.AUTHORITY_DENIED,
        denial.id,
    )
    assert task.error["code"] == "AUTHORITY_DENIED"
    assert "authority changed" in task.error["message"] and "credential_gateway" in task.error["message"]
    # The worker's ledger says the call was cut, and what of it came: the gateway's record
    # of the same call holds the text itself.
    effect = Effect.objects.get(task_id=t)
    delivered = call.response["body"]["choices"][0]["message"]["content"]
    assert (effect.state, effect.sends, effect.epoch) == (states.PARTIAL, 1, 1)
    receipt = effect.receipt
    assert (receipt["cut"], receipt["call"], receipt["denial"], receipt["boundary"], receipt["reason_code"]) == (
        "AUTHZ_REVOKED",
        str(call.id),
        str(denial.id),
        "credential_gateway",
        "no_grant_agent",
    )
    assert receipt["decision"] == str(call.decision_id) == str(Decision.objects.get(task_id=t, allowed=True).id)
    assert 0 < receipt["chunks"] < 80 and receipt["text_length"] == len(delivered) > 0
    partial_event = AuditEvent.objects.get(task_id=t, kind="effect.partial")
    assert (partial_event.data["effect"], partial_event.data["receipt_digest"]) == (effect.id, encoding.digest(receipt))
    assert not Step.objects.filter(task_id=t, kind="effect").exists()  # nothing journaled
    sent = len(model.recorded())
    assert sent == 1

    # Granted again and resumed: the partial call is retaken and sent once more under its
    # key, decided on current rows; the partial receipt stays in the trail.
    give_both("model.call", "model:fake-1", agent=AGENT)
    model.set(reply="all of it", chunks=3, chunk_delay=0.0)
    task_resume(task_id=t, actor="user:alice", note="granted again")
    wait_until(
        lambda: Task.objects.filter(id=t, status=states.COMPLETED).exists(),
        timeout=60,
        message="the resumed task to complete",
    )
    assert len(model.recorded()) == sent + 1
    assert model.recorded()[-1]["idempotency_key"] == effect.key
    effect.refresh_from_db()
    assert (effect.state, effect.sends, effect.receipt["text"]) == (states.COMMITTED, 2, "all of it")
    assert Task.objects.get(id=t).output["text"] == "all of it"
    resent = AuditEvent.objects.get(task_id=t, kind="effect.resent")
    assert resent.data["partial_digest"] == encoding.digest(receipt) and resent.data["previous_epoch"] == 1
    assert AuditEvent.objects.filter(task_id=t, kind="effect.partial").count() == 1
    wait_until(
        lambda: (
            sorted(GatewayCall.objects.filter(task_id=t).values_list("outcome", flat=True)) == ["committed", "partial"]
        ),
        timeout=10,
        message="the resent call to be recorded committed",
    )
