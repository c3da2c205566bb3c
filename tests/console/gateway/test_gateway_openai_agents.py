"""End to end: plain OpenAI Agents SDK agents run by StewardRunner (tests/agents.py t.oa.*)
on real Celery workers, their model requests through a real web server's credential
gateway to the fake model; a worker is SIGKILLed at the same points of a run as the
Pydantic AI runs of test_gateway_pydantic_ai.py, with the same outcome:

| killed                                                          | on takeover                                   |
|-----------------------------------------------------------------|-----------------------------------------------|
| after the model answered with a tool call, before the tool ran  | the answer is read from the ledger, not asked |
| after the tool ran, before its result was journaled             | the tool runs again (the one call running);   |
|                                                                 | the model is not asked again                  |
| in the middle of a model stream                                 | that request is re-sent under its key; the    |
|                                                                 | other is sent once; the tool runs once        |
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
from tests.console.gateway.test_gateway_pydantic_ai import finished, journal, model_keys, tool_runs
from tests.faults.support import armed, attempts_of, sigkill, submit, wait_marker, worker_name
from tests.harness import wait_until
from tests.runtime.authz.common import ADMIN, give_both

pytestmark = [pytest.mark.integration]

# The Agents SDK hands the model a tool's answer as str() of it.
REPLY = "tool said: ['a note about cats?']"
RUN = [("effect", "model:fake-1"), ("step", "tool:oa_search"), ("effect", "model:fake-1")]


@pytest.fixture
def env(gateway_web, tmp_path, fake):
    for name in ("t.oa.search", "t.oa.stream", "t.oa.submit", "t.oa.approve"):
        give_both("model.call", "model:fake-1", agent=name)
    return {
        "STEWARD_GATEWAY_URL": gateway_web.url,
        "T_PA_TOOL_LOG": str(tmp_path / "tool.log"),
        "T_PA_SERVICE_URL": fake.url,
    }


def test_an_agents_sdk_run_journals_each_model_request_and_tool_call(live, fleet, env, model):
    fleet.workers(1, env=env)
    t = submit("t.oa.search", {"prompt": "cats?"}).task_id
    task = finished(t)
    assert (task.status, task.output) == (states.COMPLETED, REPLY), task.error
    assert journal(t) == RUN
    effects = list(Effect.objects.filter(task_id=t).order_by("step_seq"))
    assert [(e.name, e.state, e.untrusted) for e in effects] == [("model:fake-1", "committed", True)] * 2
    assert model_keys(model) == Counter({e.key: 1 for e in effects})
    assert GatewayCall.objects.filter(task_id=t, outcome="committed").count() == 2
    first, second = (r["body"] for r in model.recorded())
    assert first["tools"][0]["function"]["name"] == "oa_search"
    assert first["messages"] == [
        {"role": "system", "content": "Answer from the search."},
        {"role": "user", "content": "cats?"},
    ]
    assert second["messages"][-1]["role"] == "tool"
    step = Step.objects.get(task_id=t, name="tool:oa_search")
    assert step.output == {"untrusted": True, "source": "tool:oa_search", "value": ["a note about cats?"]}
    assert len(tool_runs(Path(env["T_PA_TOOL_LOG"]))) == 1


KILLS = {
    "after_receipt_before_journal@model:fake-1": 1,
    "before_step_journal@tool:oa_search": 2,
}


@pytest.mark.parametrize("point", KILLS)
def test_a_worker_killed_mid_run_is_taken_over_and_no_answered_model_request_is_repeated(
    live, fleet, env, model, tmp_path, point
):
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    fleet.supervisors(1)
    (first,) = fleet.workers(1, env={**env, **armed(fault_dir, point)}, wait=False)
    t = submit("t.oa.search", {"prompt": "cats?"}).task_id
    _, held = wait_marker(fault_dir, t, point)
    asked_before_kill = model_keys(model)
    sigkill(fleet, held["pid"])
    fleet.workers(1, env=env)
    task = finished(t)
    assert (task.status, task.output) == (states.COMPLETED, REPLY), task.error
    assert attempts_of(t) == [(1, states.FIRST, "lease_expired"), (2, states.RECOVERY, "complete")]
    assert task.attempts.filter(epoch=1, worker=worker_name(first.pid)).exists()
    effects = list(Effect.objects.filter(task_id=t).order_by("step_seq"))
    assert [(e.name, e.state) for e in effects] == [("model:fake-1", "committed")] * 2
    assert model_keys(model) == Counter({e.key: 1 for e in effects})
    assert set(asked_before_kill) <= {e.key for e in effects} and sum(asked_before_kill.values()) == 1
    assert journal(t) == RUN
    assert len(tool_runs(Path(env["T_PA_TOOL_LOG"]))) == KILLS[point]


def test_a_worker_killed_in_the_middle_of_a_model_stream_is_taken_over_and_the_run_completes(
    live, fleet, env, model, tmp_path
):
    model.set(chunks=18, chunk_delay=0.15)  # the first reply, a tool call, streams for about 2.5 s
    fleet.supervisors(1)
    (first,) = fleet.workers(1, env=env)
    earlier = set(model.sent)
    t = submit("t.oa.stream", {"prompt": "cats?"}).task_id
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
    assert asked[effects[1].key] == 1 and asked[key] >= 1 and set(asked) == {e.key for e in effects}
    assert [r["body"]["stream"] for r in model.recorded()][-1] is True
    assert journal(t) == RUN
    assert len(tool_runs(Path(env["T_PA_TOOL_LOG"]))) == 1


def test_an_effect_tool_interrupted_after_it_acted_is_re_sent_under_its_key_and_acts_once(
    live, fleet, env, model, tmp_path, fake
):
    point = "after_effect_before_receipt@tool:oa_send_report"
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    fleet.supervisors(1)
    fleet.workers(1, env={**env, **armed(fault_dir, point)}, wait=False)
    t = submit("t.oa.submit", {"prompt": "the report"}).task_id
    _, held = wait_marker(fault_dir, t, point)
    sigkill(fleet, held["pid"])
    fleet.workers(1, env=env)
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    tool = Effect.objects.get(task_id=t, name="tool:oa_send_report")
    assert (tool.state, tool.keyed, tool.sends, tool.epoch) == (states.COMMITTED, True, 2, 2)
    assert fake.performed_by_key() == {tool.key: 1}  # sent twice, acted on once
    models = Effect.objects.filter(task_id=t, name="model:fake-1")
    assert model_keys(model) == Counter({e.key: 1 for e in models}) and models.count() == 2
    assert journal(t) == [("effect", "model:fake-1"), ("effect", "tool:oa_send_report"), ("effect", "model:fake-1")]


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_tool_that_needs_approval_waits_in_the_inbox_holding_no_worker_and_runs_once_approved(
    live, fleet, env, model, fake, decision
):
    fleet.supervisors(1)
    fleet.workers(1, env=env)
    t = submit("t.oa.approve", {"prompt": "the summary"}).task_id
    wait_until(
        lambda: Task.objects.filter(id=t, status=states.BLOCKED, blocked_reason=states.APPROVAL_PENDING).exists(),
        timeout=60,
        message="the task to wait for approval",
    )
    approval = Approval.objects.get(task_id=t)
    assert approval.action == {"tool": "oa_send_summary", "arguments": {"summary": "the summary"}}
    assert not Attempt.objects.filter(task_id=t, ended_at__isnull=True).exists()  # no worker held
    assert fake.performed_by_key() == {}
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision=decision, comment="ok")
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    models = list(Effect.objects.filter(task_id=t, name="model:fake-1"))
    assert model_keys(model) == Counter({e.key: 1 for e in models}) and len(models) == 2  # none asked again
    if decision == "approve":
        sent = Effect.objects.get(task_id=t, name="tool:oa_send_summary")
        assert fake.performed_by_key() == {sent.key: 1}
        sends = [("effect", "tool:oa_send_summary")]
    else:
        assert fake.performed_by_key() == {}
        assert task.output == "tool said: A person's approval of this call was denied: ok. It was not run."
        sends = []
    assert journal(t) == [
        ("effect", "model:fake-1"),
        ("approval", "approve:oa_send_summary"),
        ("approval_check", "approve:oa_send_summary"),
        *sends,
        ("effect", "model:fake-1"),
    ]


def test_the_demos_briefer_searches_the_notes_and_answers_from_them(live, fleet, env, model):
    give_both("model.call", "model:fake-1", agent="research.briefer")
    fleet.workers(1, env=env)
    t = submit("research.briefer", {"prompt": "What do the lab notes say about cosine decay?"}).task_id
    task = finished(t)
    assert task.status == states.COMPLETED, task.error
    assert task.output.startswith("tool said: ") and "Cosine decay" in task.output
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:search_notes"), ("effect", "model:fake-1")]


def test_a_stop_while_a_tool_runs_cancels_the_run_acknowledged_by_every_boundary(live, fleet, env, model):
    give_both("model.call", "model:fake-1", agent="t.oa.slow")
    fleet.workers(1, env={**env, "T_PA_TOOL_SECONDS": "60"})
    t = submit("t.oa.slow", {"prompt": "cats?"}).task_id
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
    assert StopAck.objects.get(task_id=t, boundary=states.WORKER).detail["ended"] == "cleanly"
    assert (stopped.finished_at - stop.requested_at).total_seconds() < 10  # not the tool's 60 s
    assert journal(t) == [("effect", "model:fake-1")] and len(model.recorded()) == 1


def test_a_grant_revoked_while_a_tool_runs_blocks_the_run_at_its_next_model_request_naming_the_gateway(
    live, fleet, env, model
):
    agent_grant, _ = give_both("model.call", "model:fake-1", agent="t.oa.slow")
    fleet.workers(1, env={**env, "T_PA_TOOL_SECONDS": "2"})
    t = submit("t.oa.slow", {"prompt": "cats?"}).task_id
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
    assert journal(t) == [("effect", "model:fake-1"), ("step", "tool:oa_slow_search")]
    assert len(model.recorded()) == 1
