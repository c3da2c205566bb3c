"""The credential gateway boundary of a stop (runtime/gateway/services.py): a stopped
task's tokens are refused `task_stopped`, its stream in flight is cut at the next chunk
with TASK_STOPPED, and the gateway acknowledges once its last call in flight ended, with
what it cut, what finished, what stayed unresolved and how many tokens it refused. A
call that never returns never lets the gateway answer: the stop finishes at its bound,
with the gateway's acknowledgment missing and the call unresolved.

The first tests call the gateway directly (a task marked running, no worker); the last
two run the agent on a real worker (t.model, streaming through the real web process).
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from runtime import states
from runtime.models import AuditEvent, Decision, Effect, GatewayCall, Stop, Task
from runtime.stops.services import task_stop
from tests.console.gateway.conftest import (
    MODEL_KEY,
    _until_its_sessions_are_gone,
    completion_body,
    events,
    model_token,
    model_url,
    open_stream,
    post,
    until_error,
)
from tests.e2e.stack import WebServer
from tests.harness import race, wait_until
from tests.runtime.authz.common import give_both, running_task
from tests.stops import acks, cancelled, missing_at_cancel, since_stop, sweeping

pytestmark = [pytest.mark.integration]

ACTOR = "user:alice"
LONG = " ".join(f"w{i}" for i in range(60))  # 60 chunks 100 ms apart: a 6 s stream


def test_a_stopped_tasks_token_is_refused_task_stopped_and_recorded(live, gateway_web, model):
    t = running_task()
    give_both("model.call", "model:fake-1")
    token = model_token(t)  # minted while it ran
    started = task_stop(task_id=t, actor=ACTOR, reason="no more calls")
    assert started.cancelled == [t]  # nothing of it was running anywhere: all four answered at once

    status, answer, _ = post(model_url(gateway_web), token=token, body=completion_body(), key="after-stop")
    assert status == 403
    assert (answer["code"], answer["details"]["boundary"], answer["details"]["reason_code"]) == (
        "AUTHORITY_DENIED",
        "credential_gateway",
        "task_stopped",
    )
    decision = Decision.objects.get(task_id=t)
    assert (decision.allowed, decision.reason_code, decision.boundary) == (False, "task_stopped", "credential_gateway")
    assert GatewayCall.objects.get(task_id=t).outcome == "denied"
    assert AuditEvent.objects.filter(task_id=t, kind="authz.denied", data__reason_code="task_stopped").count() == 1
    assert model.recorded() == []  # nothing was forwarded


def test_a_stream_in_flight_is_cut_by_the_stop_within_a_second_and_the_gateway_acknowledges(live, gateway_web, model):
    t = running_task()
    give_both("model.call", "model:fake-1")
    model.set(reply=LONG, chunks=60, chunk_delay=0.1)
    with open_stream(model_url(gateway_web), token=model_token(t), body=completion_body(stream=True)) as response:
        stream = events(response)
        assert next(stream)[0] == "message"  # the stream is flowing
        started = task_stop(task_id=t, actor=ACTOR, reason="cut the stream")
        stopped = time.monotonic()
        assert started.stopping == [t]  # the gateway carries a call of it: it must answer
        after, cut = until_error(stream)
        rest = list(stream)
    assert after and after[-1][0] == "error", after[-3:]
    print(f"\nstream cut {(cut - stopped) * 1000:.0f} ms after the stop committed")
    assert cut - stopped < 1.0
    error = after[-1][1]
    assert (error["code"], error["details"]["reason_code"], error["details"]["boundary"]) == (
        "TASK_STOPPED",
        "task_stopped",
        "credential_gateway",
    )
    assert rest == []  # terminal: no [DONE], nothing after it
    call = wait_until(
        lambda: GatewayCall.objects.filter(task_id=t).exclude(outcome="admitted").first(),
        message="the cut call to be recorded",
    )
    assert (call.outcome, call.receipt["cut_by"]) == ("partial", "task_stopped")
    # The gateway's acknowledgment, and with it the last one: the task is cancelled.
    task = wait_until(
        lambda: Task.objects.filter(id=t, status=states.CANCELLED).first(),
        message="the task to be cancelled once the gateway acknowledged",
    )
    ack = acks(t)[states.CREDENTIAL_GATEWAY]
    assert ack.detail == {"cut": [str(call.id)], "finished": [], "unresolved": [], "tokens_refused": 1}
    assert ack.by == "credential_gateway"
    stop = Stop.objects.get(id=task.stop_id)
    assert (call.finished_at - stop.requested_at).total_seconds() < 1.0
    assert task.status_note == "cancelled: every boundary acknowledged"


@pytest.fixture
def worker(fleet, gateway_web):
    (started,) = fleet.workers(1, env={"STEWARD_GATEWAY_URL": gateway_web.url})
    return started


def _streaming(t):
    return wait_until(
        lambda: GatewayCall.objects.filter(task_id=t, outcome="admitted").first(),
        timeout=30,
        message="the worker's model call to be admitted",
    )


def test_a_workers_streaming_model_call_is_cut_and_the_task_ends_cancelled_not_blocked(
    live, worker, gateway_web, model
):
    give_both("model.call", "model:fake-1", agent="t.model")
    model.set(reply=LONG, chunks=60, chunk_delay=0.1)
    from runtime.tasks.services import task_submit

    t = task_submit(agent="t.model", input={"stream": True}, tenant="acme", owner=ACTOR, actor=ACTOR).task_id
    call = _streaming(t)
    wait_until(model.recorded, message="the model to be streaming")
    task_stop(task_id=t, actor=ACTOR, reason="stop the streaming agent")
    task = wait_until(
        lambda: Task.objects.filter(id=t, status__in=states.TERMINAL | {states.BLOCKED}).first(),
        timeout=10,
        message="the task to end",
    )
    assert task.status == states.CANCELLED, (task.status, task.status_note)
    answered = acks(t)
    assert set(answered) == set(states.STOP_BOUNDARIES)
    assert (answered[states.WORKER].detail["ended"], answered[states.WORKER].detail["at"]) == (
        "cleanly",
        "stream cut by the gateway",
    )
    call.refresh_from_db()
    assert (call.outcome, call.receipt["cut_by"]) == ("partial", "task_stopped")
    assert answered[states.CREDENTIAL_GATEWAY].detail["cut"] == [str(call.id)]
    stop = Stop.objects.get(id=task.stop_id)
    figures = {
        name: (at - stop.requested_at).total_seconds()
        for name, at in (
            ("stream cut", call.finished_at),
            ("worker ack", answered[states.WORKER].at),
            ("cancelled", task.finished_at),
        )
    }
    print("\n" + ", ".join(f"stop -> {name} {s * 1000:.0f} ms" for name, s in figures.items()))
    assert all(s < 1.0 for s in figures.values()), figures
    # The model call is an effect whose outcome the stop left unknown: its intent stays.
    assert Effect.objects.get(task_id=t).state == states.INTENT
    assert not task.blocked_reason and task.output is None


def test_a_silent_providers_stream_is_cut_by_the_stop_at_once_not_at_its_next_chunk(live, worker, gateway_web, model):
    give_both("model.call", "model:fake-1", agent="t.model")
    model.set(reply="first then nothing", chunks=2, chunk_delay=600)  # one chunk, then silence
    from runtime.tasks.services import task_submit

    t = task_submit(agent="t.model", input={"stream": True}, tenant="acme", owner=ACTOR, actor=ACTOR).task_id
    call = _streaming(t)
    wait_until(model.recorded, message="the model to be streaming")
    task_stop(task_id=t, actor=ACTOR, reason="the provider is silent")
    task = cancelled(t, timeout=10)
    took = since_stop(task, task.finished_at)
    print(f"\nsilent provider: stream cut and task cancelled {took * 1000:.0f} ms after the stop")
    assert took < 1.0
    assert missing_at_cancel(t) == (True, [])
    call.refresh_from_db()
    assert (call.outcome, call.receipt["cut_by"]) == ("partial", "task_stopped")
    answered = acks(t)
    assert answered[states.CREDENTIAL_GATEWAY].detail["cut"] == [str(call.id)]
    assert (answered[states.WORKER].detail["ended"], answered[states.WORKER].detail["at"]) == (
        "cleanly",
        "stream cut by the gateway",
    )


@pytest.fixture
def frozen_web(child_env, fake_model, django_db_blocker):
    """A web process of this test's own, to freeze (SIGSTOP) mid-call."""
    env = {**child_env, "STEWARD_MODEL_URL": fake_model.url, "STEWARD_MODEL_KEY": MODEL_KEY}
    web = WebServer(env).start()
    try:
        yield web.wait_ready()
    finally:
        web.kill()
        with django_db_blocker.unblock():
            _until_its_sessions_are_gone(web)


def test_a_gateway_that_never_answers_leaves_its_call_unresolved_and_the_bound_finishes_the_stop(
    live, fleet, frozen_web, model
):
    sweeping(fleet)
    (started,) = fleet.workers(1, env={"STEWARD_GATEWAY_URL": frozen_web.url})
    give_both("model.call", "model:fake-1", agent="t.model")
    model.set(reply=LONG, chunks=60, chunk_delay=0.1)
    from runtime.tasks.services import task_submit

    t = task_submit(agent="t.model", input={"stream": True}, tenant="acme", owner=ACTOR, actor=ACTOR).task_id
    call = _streaming(t)
    wait_until(model.recorded, message="the model to be streaming")
    frozen_web.signal(signal.SIGSTOP)  # the gateway holds the call and will never answer
    task_stop(task_id=t, actor=ACTOR, reason="the gateway hangs", bound_seconds=2.0)
    task = cancelled(t, timeout=10)
    stop = Stop.objects.get(id=task.stop_id)
    bounded = since_stop(task, task.finished_at)
    print(f"\ngateway never answers: cancelled at the bound after {bounded * 1000:.0f} ms (bound 2000 ms)")
    assert 1.9 <= bounded < 3.5  # requested_at is the insert's statement time, the deadline the transaction's
    assert missing_at_cancel(t) == (False, ["credential_gateway"])
    # The worker left the call (after its wait for the gateway's cut) and answered.
    worker_ack = acks(t)[states.WORKER]
    assert (worker_ack.detail["ended"], worker_ack.detail["at"]) == ("cleanly", "in gateway code")
    # The call is still in flight at the gateway: unresolved, and shown as such.
    call.refresh_from_db()
    assert call.outcome == "admitted" and states.CREDENTIAL_GATEWAY not in acks(t)
    assert Stop.objects.get(id=stop.id).outcome == "bounded"


TRIALS = 20


def test_no_gateway_call_is_admitted_after_the_stop_commits(live, gateway_web, model):
    """A stop racing a call, over barrier trials: a call sent after the stop committed is
    denied task_stopped; one admitted before it is carried to its end and the gateway
    acknowledges it as finished (the stop saw it in flight: the decision's FOR KEY SHARE
    of the task row orders the two), or it ended before the stop looked."""
    counts = {"admitted before": 0, "denied after": 0}
    for trial in range(TRIALS):
        t = running_task()
        give_both("model.call", "model:fake-1")
        token = model_token(t)
        marks = {}
        committed = threading.Event()

        def act(i, t=t, token=token, marks=marks, committed=committed):
            if i == 0:
                # Spread the stop over the call's admission (an HTTP round trip to the
                # gateway first): some calls are admitted before it, some after.
                time.sleep((trial % 10) * 0.004)
                started = task_stop(task_id=t, actor=ACTOR, reason=f"race {trial}")
                marks["committed"] = time.monotonic()
                committed.set()
                return started
            if trial % 4 == 3:
                # Every fourth call is sent once the stop has committed, whatever the
                # machine's load: the race above may go either way, and on a loaded
                # machine every call was admitted first, leaving the refusal untested.
                committed.wait(30)
            marks["sent"] = time.monotonic()
            return post(model_url(gateway_web), token=token, body=completion_body(), key=f"stop-race-{trial}")

        started, (status, answer, _) = race(2, act)
        assert status in (200, 403), answer
        try:
            wait_until(
                lambda t=t: Task.objects.filter(id=t, status=states.CANCELLED).exists(),
                message=f"trial {trial}: the task to be cancelled",
            )
        except AssertionError:
            raise AssertionError(
                (
                    status,
                    started,
                    {k: (v.by, v.detail) for k, v in acks(t).items()},
                    list(GatewayCall.objects.filter(task_id=t).values("outcome", "started_at", "finished_at")),
                )
            ) from None
        gateway = acks(t)[states.CREDENTIAL_GATEWAY]
        if status == 200:
            counts["admitted before"] += 1
            call = GatewayCall.objects.get(task_id=t)
            if gateway.by == "credential_gateway":  # the stop saw it in flight and waited for it
                assert gateway.detail["finished"] == [str(call.id)] and started.stopping == [t]
            else:  # it had ended before the stop looked for calls in flight (under its locks)
                assert started.cancelled == [t] and call.outcome == "committed"
                assert gateway.detail["in_flight"] == []
        else:
            assert answer["details"]["reason_code"] == "task_stopped", answer
            counts["denied after"] += 1
        if marks["sent"] > marks["committed"]:
            assert status == 403, f"trial {trial}: a call sent after the stop committed was admitted"
    assert len(model.recorded()) == counts["admitted before"]
    print(f"\nstop race over {TRIALS} trials: {counts}")
    assert counts["denied after"] > 0
