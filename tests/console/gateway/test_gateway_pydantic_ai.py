"""End to end: plain Pydantic AI agents wrapped by StewardAgent (tests/agents.py t.pa.*)
run on real Celery workers, their model requests through a real web server's credential
gateway to the fake model, and a worker is SIGKILLed at the points of a run where a
framework without a journal would lose or repeat work:

| killed                                                          | on takeover                                   |
|-----------------------------------------------------------------|-----------------------------------------------|
| after the model answered with a tool call, before the tool ran  | the answer is read from the ledger, not asked |
| after the tool ran, before its result was journaled             | the tool runs again (the one call running);   |
|                                                                 | the model is not asked again                  |
| an effect tool sent, its receipt not committed                  | re-sent under the same key: one effect        |
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from runtime import states
from runtime.approvals.services import approval_decide
from runtime.authz.services import grant_revoke
from runtime.models import Approval, Attempt, Decision, Effect, GatewayCall, Step, Stop, StopAck, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import task_submit
from tests.faults.support import armed, attempts_of, sigkill, submit, wait_marker, worker_name
from tests.harness import wait_until
from tests.runtime.authz.common import ADMIN, give_both

pytestmark = [pytest.mark.integration]

REPLY = 'tool said: ["a note about cats?"]'


def finished(task_id, timeout: float = 60):
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status__in=states.TERMINAL).first(),
        timeout=timeout,
        message="the task to finish",
    )


def journal(task_id) -> list[tuple[str, str]]:
    return list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("kind", "name"))


def model_keys(model) -> Counter:
    """How many times the fake model was asked under each Idempotency-Key."""
    return Counter(r["idempotency_key"] for r in model.recorded() if r["path"].endswith("/chat/completions"))


def tool_runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def env(gateway_web, tmp_path, fake):
    give_both("model.call", "model:fake-1", agent="t.pa.search")
    give_both("model.call", "model:fake-1", agent="t.pa.submit")
    return {
        "STEWARD_GATEWAY_URL": gateway_web.url,
        "T_PA_TOOL_LOG": str(tmp_path / "tool.log"),
        "T_PA_SERVICE_URL": fake.url,
    }


def test_a_pydantic_ai_run_journals_each_model_request_and_tool_call(live, fleet, env, model, tmp_path):
    fleet.workers(1, env=env)
    t = submit("t.pa.search", {"prompt": "cats?"}).task_id
    task = finished(t)
    assert (task.status, task.output) == (states.COMPLETED, REPLY), task.error
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:search"), ("effect", "model:fake-1")]
    # Two model requests, each once, each a committed keyed effect the gateway carried.
    effects = list(Effect.objects.filter(task_id=t).order_by("step_seq"))
    assert [(e.name, e.state, e.untrusted) for e in effects] == [("model:fake-1", "committed", True)] * 2
    assert model_keys(model) == Counter({e.key: 1 for e in effects})
    assert GatewayCall.objects.filter(task_id=t, outcome="committed").count() == 2
    # The first asked with the tool declared; the second carried the tool's answer back.
    first, second = (r["body"] for r in model.recorded())
    assert first["tools"][0]["function"]["name"] == "search" and first["messages"][0]["role"] == "system"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": first_call_id(effects[0]),
        "content": '["a note about cats?"]',
    }
    # The tool's answer is journaled as data from outside.
    step = Step.objects.get(task_id=t, name="tool:search")
    assert step.output == {"untrusted": True, "source": "tool:search", "value": ["a note about cats?"]}
    assert len(tool_runs(Path(env["T_PA_TOOL_LOG"]))) == 1


def first_call_id(effect) -> str:
    return effect.receipt["tool_calls"][0]["id"]


# Where a worker is killed, and what the takeover must do: tool runs, and the attempts.
KILLS = {
    # The model answered with a tool call; its receipt is committed, not journaled.
    "after_receipt_before_journal@model:fake-1": 1,
    # The tool ran; its result is not journaled: the one call that was running runs again.
    "before_step_journal@tool:search": 2,
}


@pytest.mark.parametrize("point", KILLS)
def test_a_worker_killed_mid_run_is_taken_over_and_no_answered_model_request_is_repeated(
    live, fleet, env, model, tmp_path, point
):
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    fleet.supervisors(1)
    (first,) = fleet.workers(1, env={**env, **armed(fault_dir, point)}, wait=False)
    t = submit("t.pa.search", {"prompt": "cats?"}).task_id
    _, held = wait_marker(fault_dir, t, point)
    asked_before_kill = model_keys(model)
    sigkill(fleet, held["pid"])
    fleet.workers(1, env=env)
    task = finished(t)
    assert (task.status, task.output) == (states.COMPLETED, REPLY), task.error
    assert attempts_of(t) == [(1, states.FIRST, "lease_expired"), (2, states.RECOVERY, "complete")]
    assert task.attempts.filter(epoch=1, worker=worker_name(first.pid)).exists()
    # Each model request was sent once: the one answered before the kill was never asked again.
    effects = list(Effect.objects.filter(task_id=t).order_by("step_seq"))
    assert [(e.name, e.state) for e in effects] == [("model:fake-1", "committed")] * 2
    assert model_keys(model) == Counter({e.key: 1 for e in effects})
    assert set(asked_before_kill) <= {e.key for e in effects} and sum(asked_before_kill.values()) == 1
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:search"), ("effect", "model:fake-1")]
    assert len(tool_runs(Path(env["T_PA_TOOL_LOG"]))) == KILLS[point]


def test_an_effect_tool_interrupted_after_it_acted_is_re_sent_under_its_key_and_acts_once(
    live, fleet, env, model, tmp_path, fake
):
    point = "after_effect_before_receipt@tool:send_report"
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    fleet.supervisors(1)
    fleet.workers(1, env={**env, **armed(fault_dir, point)}, wait=False)
    t = submit("t.pa.submit", {"prompt": "the report"}).task_id
    _, held = wait_marker(fault_dir, t, point)
    sigkill(fleet, held["pid"])
    fleet.workers(1, env=env)
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    tool = Effect.objects.get(task_id=t, name="tool:send_report")
    assert (tool.state, tool.keyed, tool.sends, tool.epoch) == (states.COMMITTED, True, 2, 2)
    assert fake.performed_by_key() == {tool.key: 1}  # sent twice, acted on once
    models = Effect.objects.filter(task_id=t, name="model:fake-1")
    assert model_keys(model) == Counter({e.key: 1 for e in models}) and models.count() == 2
    assert journal(t) == [("effect", "model:fake-1"), ("effect", "tool:send_report"), ("effect", "model:fake-1")]


def test_the_demos_research_assistant_searches_the_notes_and_answers_from_them(live, fleet, env, model):
    give_both("model.call", "model:fake-1", agent="research.assistant")
    fleet.workers(1, env=env)
    t = submit("research.assistant", {"prompt": "What do the lab notes say about warmup?"}).task_id
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    assert task.output.startswith("tool said: ") and "Linear warmup" in task.output
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:search"), ("effect", "model:fake-1")]


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_tool_that_requires_approval_waits_in_the_inbox_holding_no_worker_and_runs_once_approved(
    live, fleet, env, model, fake, decision
):
    give_both("model.call", "model:fake-1", agent="t.pa.approve")
    fleet.supervisors(1)
    fleet.workers(1, env=env)
    t = submit("t.pa.approve", {"prompt": "the summary"}).task_id
    wait_until(
        lambda: Task.objects.filter(id=t, status=states.BLOCKED, blocked_reason=states.APPROVAL_PENDING).exists(),
        timeout=60,
        message="the task to wait for approval",
    )
    approval = Approval.objects.get(task_id=t)
    assert approval.action == {"tool": "send_summary", "arguments": {"summary": "the summary"}}
    assert not Attempt.objects.filter(task_id=t, ended_at__isnull=True).exists()  # no worker held
    assert fake.performed_by_key() == {}
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision=decision, comment="ok")
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    models = list(Effect.objects.filter(task_id=t, name="model:fake-1"))
    assert model_keys(model) == Counter({e.key: 1 for e in models}) and len(models) == 2  # none asked again
    if decision == "approve":
        sent = Effect.objects.get(task_id=t, name="tool:send_summary")
        assert fake.performed_by_key() == {sent.key: 1}
        assert task.output.startswith("tool said: {")
        sends = [("effect", "tool:send_summary")]
    else:
        assert fake.performed_by_key() == {}
        assert task.output == "tool said: A person's approval of this call was denied: ok. It was not run."
        sends = []
    assert journal(t) == [
        ("effect", "model:fake-1"),
        ("approval", "approve:send_summary"),
        ("approval_check", "approve:send_summary"),
        *sends,
        ("effect", "model:fake-1"),
    ]


def test_a_streamed_run_journals_the_same_calls_and_its_tool_call_arrives_in_pieces(live, fleet, env, model):
    give_both("model.call", "model:fake-1", agent="t.pa.stream")
    model.set(chunks=6)
    fleet.workers(1, env=env)
    t = submit("t.pa.stream", {"prompt": "cats?"}).task_id
    task = finished(t)
    assert (task.status, task.output) == (states.COMPLETED, REPLY), task.error
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:search"), ("effect", "model:fake-1")]
    assert [r["body"]["stream"] for r in model.recorded()] == [True, True]
    first = Effect.objects.filter(task_id=t).order_by("step_seq").first()
    assert first.receipt["tool_calls"][0]["function"] == {"name": "search", "arguments": '{"query": "cats?"}'}


def test_a_worker_killed_in_the_middle_of_a_model_stream_is_taken_over_and_the_run_completes(
    live, fleet, env, model, tmp_path
):
    give_both("model.call", "model:fake-1", agent="t.pa.stream")
    model.set(chunks=18, chunk_delay=0.15)  # the first reply, a tool call, streams for about 2.5 s
    fleet.supervisors(1)
    (first,) = fleet.workers(1, env=env)
    earlier = set(model.sent)  # the streams of earlier tests (the fixture forgets requests, not these)
    t = submit("t.pa.stream", {"prompt": "cats?"}).task_id
    key = wait_until(
        lambda: next((k for k, sent in model.sent.items() if k not in earlier and sent), None),
        interval=0.02,
        message="the first reply to begin streaming",
    )
    sigkill(fleet, first.pid)  # mid-stream: the reply's answer is not recorded anywhere yet
    model.set(chunk_delay=0.0)
    fleet.workers(1, env=env)
    task = finished(t)
    assert (task.status, task.output) == (states.COMPLETED, REPLY), task.error
    assert task.attempts.filter(epoch=1, worker=worker_name(first.pid)).exists()
    effects = list(Effect.objects.filter(task_id=t).order_by("step_seq"))
    assert [(e.name, e.state) for e in effects] == [("model:fake-1", "committed")] * 2
    assert effects[0].key == key
    asked = model_keys(model)
    # The cut request is sent again under its key (its answer was never recorded); the
    # second request, answered once, never again.
    assert asked[effects[1].key] == 1 and asked[key] >= 1 and set(asked) == {e.key for e in effects}
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:search"), ("effect", "model:fake-1")]
    assert len(tool_runs(Path(env["T_PA_TOOL_LOG"]))) == 1


# A solo worker runs the attempt in its main thread, and a stop reaches it as a signal; a
# dense worker (STEWARD_WORKER_ATTEMPTS) runs it in a thread of its own, and a stop reaches
# it as an asynchronous exception, which Python raises only between bytecodes.
WORKER_KINDS = {"solo": {}, "dense": {"STEWARD_WORKER_ATTEMPTS": "4", "STEWARD_DB_POOL_MAX": "3"}}


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_a_stop_while_a_tool_runs_cancels_the_run_acknowledged_and_the_worker_runs_the_next_task(
    live, fleet, env, model, kind
):
    give_both("model.call", "model:fake-1", agent="t.pa.slow")
    (worker,) = fleet.workers(1, env={**env, **WORKER_KINDS[kind], "T_PA_TOOL_SECONDS": "60"})
    t = submit("t.pa.slow", {"prompt": "cats?"}).task_id
    wait_until(lambda: journal(t) == [("effect", "model:fake-1")], timeout=60, message="the model to answer")
    started = task_stop(task_id=t, actor="user:alice", reason="the tool takes too long")
    stopped = wait_until(
        lambda: Task.objects.filter(id=t, status=states.CANCELLED).first(), timeout=15, message="the stop"
    )
    stop = Stop.objects.get(id=started.stop_id)
    assert stop.outcome == "acknowledged"
    assert sorted(StopAck.objects.filter(task_id=t).values_list("boundary", flat=True)) == sorted(
        states.STOP_BOUNDARIES
    )
    # Ended by the stop raised in the attempt's thread, not abandoned after the grace period.
    assert StopAck.objects.get(task_id=t, boundary=states.WORKER).detail["ended"] == "cleanly"
    took = (stopped.finished_at - stop.requested_at).total_seconds()
    print(f"\n[stop a Pydantic AI tool call, {kind} worker] requested to cancelled: {took * 1000:.0f} ms")
    assert took < 10  # not the tool's 60 s
    assert journal(t) == [("effect", "model:fake-1")]  # the interrupted tool call left nothing
    assert len(model.recorded()) == 1  # and the model was not asked again
    # The same worker goes on to run the next run whole: the stopped run left it nothing to wait for.
    give_both("model.call", "model:fake-1", agent="t.pa.search")
    after = submit("t.pa.search", {"prompt": "cats?"}).task_id
    assert finished(after).status == states.COMPLETED
    assert Attempt.objects.get(task_id=after).worker == worker_name(worker.pid)


def test_a_grant_revoked_while_a_tool_runs_blocks_the_run_at_its_next_model_request_naming_the_gateway(
    live, fleet, env, model
):
    agent_grant, _ = give_both("model.call", "model:fake-1", agent="t.pa.slow")
    fleet.workers(1, env={**env, "T_PA_TOOL_SECONDS": "2"})
    t = submit("t.pa.slow", {"prompt": "cats?"}).task_id
    wait_until(lambda: journal(t) == [("effect", "model:fake-1")], timeout=60, message="the model to answer")
    grant_revoke(grant_id=agent_grant.id, tenant="acme", actor=ADMIN, reason="no more model calls")
    task = wait_until(
        lambda: Task.objects.filter(id=t, status__in={states.BLOCKED, *states.TERMINAL}).first(),
        timeout=60,
        message="the run to end or block",
    )
    assert (task.status, task.blocked_reason) == (states.BLOCKED, states.AUTHORITY_DENIED)
    denied = Decision.objects.get(id=task.blocked_decision_id)
    assert (denied.allowed, denied.boundary) == (False, "credential_gateway")
    # The tool's call finished and is kept; the second request was refused, never sent.
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:slow_search")]
    assert len(model.recorded()) == 1


def test_the_demos_reporter_waits_for_alices_approval_then_sends_its_report_once(live, fleet, env, model, fake):
    give_both("model.call", "model:fake-1", agent="research.reporter", owner="user:dave")
    fleet.workers(1, env={**env, "STEWARD_DEMO_RESULTS_URL": fake.url})
    t = task_submit(
        agent="research.reporter",
        input={"prompt": "Warmup helped."},
        tenant="acme",
        owner="user:dave",
        actor="user:dave",
    ).task_id
    approval = wait_until(
        lambda: Approval.objects.filter(task_id=t, state=states.PENDING).first(), timeout=60, message="the approval"
    )
    assert approval.action == {"tool": "send_report", "arguments": {"report": "Warmup helped."}}
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:alice", decision="approve")
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    sent = Effect.objects.get(task_id=t, name="tool:send_report")
    assert fake.performed_by_key() == {sent.key: 1}
