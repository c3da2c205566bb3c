"""The step replay protocol (docs/contracts.md §1; docs/architecture.md, "The life of a step").

The test plays worker and supervisor in-process: run_pool() claims and runs whatever is
queued, sweep() wakes due timers and recovers expired leases. Each agent here sleeps
durably between its calls, so its second attempt replays the first one's journal.
"""

from __future__ import annotations

import collections
import functools
import math
import threading
from datetime import timedelta

import pytest
from django.db import connection

from runtime import config, states
from runtime.agents import agent
from runtime.errors import StepFailed
from runtime.models import Attempt, AuditEvent, Effect, Slot, Step, Task
from runtime.stops.services import task_stop
from tests.runtime.inprocess import NAP, recover, run, submit, wake

calls = collections.Counter()  # how often each step function really ran
seen: list = []  # what agent code observed, attempt by attempt


@pytest.fixture(autouse=True)
def _fresh_counters():
    calls.clear()
    seen.clear()


def counted(name, value=None):
    calls[name] += 1
    return calls[name] if value is None else value


def run_across_a_sleep(task_id) -> Task:
    """First attempt up to its durable sleep, a supervisor sweep once the timer is due,
    then the second attempt, which replays the journal."""
    run()
    assert Task.objects.get(id=task_id).status == states.SLEEPING
    wake()
    run()
    return Task.objects.get(id=task_id)


def journal(task_id) -> list[tuple]:
    return list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("seq", "kind", "name", "epoch"))


# --- agents ----------------------------------------------------------------------------


@agent("replay.count")
def count_agent(ctx, input):
    value = ctx.step("count", counted, "count")
    seen.append((ctx.epoch, value))
    ctx.sleep(NAP)
    return {"value": value}


@agent("replay.error")
def error_agent(ctx, input):
    try:
        ctx.step("boom", _boom)
    except StepFailed as exc:
        seen.append((ctx.epoch, type(exc).__name__, exc.step, exc.error_type, exc.message))
    ctx.sleep(NAP)
    return {}


@agent("replay.shapes")
def shapes_agent(ctx, input):
    value = ctx.step("shapes", counted, "shapes", ((1, 2), {1: "one"}, ("a", None)))
    seen.append((ctx.epoch, value))
    ctx.sleep(NAP)
    return {"value": value}


@agent("replay.clock")
def clock_agent(ctx, input):
    now, rnd = ctx.now(), ctx.random()
    seen.append((ctx.epoch, now, rnd))
    ctx.sleep(NAP)
    return {"now": now.isoformat(), "random": rnd}


UNSTORABLE = {
    "set": (lambda: {1, 2}, "not JSON serializable"),
    "object": (object, "not JSON serializable"),
    "nan": (lambda: math.nan, "NUMBER_OUT_OF_RANGE"),
    "too_large": (lambda: "x" * (config.max_output_bytes() + 1), "INPUT_TOO_LARGE"),
    # PostgreSQL's jsonb refuses \u0000: refused before the write, not by the database.
    "nul": (lambda: "a\x00b", "INVALID_STRING"),
    # A replay could not decode it (a worker's stack is deep already).
    "too_deep": (lambda: functools.reduce(lambda inner, _: [inner], range(200), []), "INPUT_TOO_DEEP"),
}


@agent("replay.unstorable")
def unstorable_agent(ctx, input):
    ctx.step("fine", counted, "fine")
    ctx.step("bad", UNSTORABLE[input["kind"]][0])
    return {"unreachable": True}


@agent("replay.swallows")
def swallowing_agent(ctx, input):
    try:
        ctx.step("bad", UNSTORABLE["set"][0])
    except Exception:  # well-meant agent code: carry on without the value
        seen.append(ctx.epoch)
    ctx.step("next", counted, "next")
    ctx.sleep(NAP)
    return {}


@agent("replay.raises")
def raises_agent(ctx, input):
    ctx.step("fine", counted, "fine")
    _give_up()


def _boom():
    calls["boom"] += 1
    raise ValueError("no good: 7")


def _give_up():
    raise RuntimeError("the agent gave up")


# --- a journaled step is never run again ---------------------------------------------------


def test_a_journaled_step_is_never_run_again(live):
    task_id = submit("replay.count")

    task = run_across_a_sleep(task_id)

    assert task.status == states.COMPLETED
    assert calls["count"] == 1
    # The second attempt received the first one's recorded output instead of running.
    assert seen == [(1, 1), (2, 1)]
    assert task.output == {"value": 1}
    assert journal(task_id) == [(0, "step", "count", 1), (1, "sleep", "sleep", 1)]
    assert list(Attempt.objects.filter(task_id=task_id).order_by("epoch").values_list("epoch", "reason")) == [
        (1, states.FIRST),
        (2, states.RESUME),
    ]


def test_a_recorded_error_is_raised_again_on_replay_without_running_the_step(live):
    task_id = submit("replay.error")

    task = run_across_a_sleep(task_id)

    assert task.status == states.COMPLETED
    assert calls["boom"] == 1
    assert seen == [
        (1, "StepFailed", "boom", "ValueError", "no good: 7"),
        (2, "StepFailed", "boom", "ValueError", "no good: 7"),
    ]
    step = Step.objects.get(task_id=task_id, seq=0)
    assert step.output is None
    assert (step.error["type"], step.error["message"]) == ("ValueError", "no good: 7")
    assert "_boom" in step.error["traceback"]


def test_outputs_come_back_as_their_json_round_trip_on_first_run_and_on_replay(live):
    task_id = submit("replay.shapes")

    task = run_across_a_sleep(task_id)

    # Tuples become lists and int keys become strings, the same on both attempts: code
    # that works on the first run works on every replay.
    expected = [[1, 2], {"1": "one"}, ["a", None]]
    assert seen == [(1, expected), (2, expected)]
    assert calls["shapes"] == 1
    assert task.output == {"value": expected}
    assert Step.objects.get(task_id=task_id, name="shapes").output == expected


def test_the_clock_and_random_values_are_journaled_and_replayed(live):
    task_id = submit("replay.clock")

    task = run_across_a_sleep(task_id)

    assert task.status == states.COMPLETED
    (_, first_now, first_rnd), (_, replayed_now, replayed_rnd) = seen
    assert (replayed_now, replayed_rnd) == (first_now, first_rnd)
    assert first_now.tzinfo is not None and 0 <= first_rnd < 1
    # The second attempt started after the sleep, yet read the first attempt's clock.
    second = Attempt.objects.get(task_id=task_id, epoch=2)
    assert second.started_at > first_now + timedelta(seconds=NAP)
    assert [kind for _, kind, _, _ in journal(task_id)] == ["now", "random", "sleep"]


# --- replay failures -----------------------------------------------------------------------


def test_a_diverging_replay_fails_the_task_with_nondeterminism(live):
    task_id = submit("t.diverges", {"seconds": NAP})

    task = run_across_a_sleep(task_id)

    assert task.status == states.FAILED
    assert task.error["code"] == "NONDETERMINISM"
    message = task.error["message"]
    assert "step 0" in message
    assert "'first-attempt'" in message and "'second-attempt'" in message
    # Nothing the diverging attempt asked for was journaled.
    assert journal(task_id) == [(0, "step", "first-attempt", 1), (1, "sleep", "sleep", 1)]
    assert AuditEvent.objects.filter(task_id=task_id, kind="task.failed").count() == 1


@pytest.mark.parametrize("kind", sorted(UNSTORABLE))
def test_a_step_output_the_journal_cannot_store_fails_the_task_and_journals_nothing_for_it(live, kind):
    task_id = submit("replay.unstorable", {"kind": kind})

    run()

    task = Task.objects.get(id=task_id)
    assert task.status == states.FAILED
    assert task.error["code"] == "NOT_JOURNALABLE"
    assert "step 'bad' returned a value the journal cannot store: " in task.error["message"]
    assert UNSTORABLE[kind][1] in task.error["message"]
    assert journal(task_id) == [(0, "step", "fine", 1)]


def test_agent_code_cannot_swallow_an_unstorable_output_and_leave_a_hole_in_the_journal(live):
    # Were the error catchable, "next" would be journaled at seq 1 over an empty seq 0,
    # and every later attempt would crash loading a journal with a gap in it.
    task_id = submit("replay.swallows")

    run()

    task = Task.objects.get(id=task_id)
    assert (task.status, task.error["code"]) == (states.FAILED, "NOT_JOURNALABLE")
    assert seen == [] and calls["next"] == 0
    assert journal(task_id) == []


def test_an_agent_that_raises_fails_the_task_with_agent_error_and_its_traceback(live):
    task_id = submit("replay.raises")

    run()

    task = Task.objects.get(id=task_id)
    assert task.status == states.FAILED
    assert task.error["code"] == "AGENT_ERROR"
    assert (task.error["type"], task.error["message"]) == ("RuntimeError", "the agent gave up")
    assert 'raise RuntimeError("the agent gave up")' in task.error["traceback"]
    assert "raises_agent" in task.error["traceback"]
    assert Attempt.objects.get(task_id=task_id).end_reason == "fail"
    assert not Slot.objects.filter(task_id=task_id).exists()


# --- fenced writes -------------------------------------------------------------------------
# Halfway through the first attempt, a supervisor (lease expired) or an operator (cancel)
# moves the task on from another database connection. Whatever the old attempt writes
# next (a journal row, its status, an effect intent or a child) must be refused.


def on_another_connection(fn, *args):
    """Run fn on a thread of its own, hence on a database connection of its own, as
    another process would, and wait for it."""
    outcome = {}

    def target():
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller, not lost in the thread
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the other connection did not finish"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def cancel(task_id) -> None:
    task_stop(task_id=task_id, actor="user:alice", reason="stop")


STOPS = {"recovery": recover, "cancel": cancel}
WRITES = ["journal", "status", "effect", "child"]


@agent("replay.fenced")
def fenced_agent(ctx, input):
    stop = STOPS[input["by"]]
    ctx.step("before", counted, "before")
    if input["write"] == "journal":
        # The step runs while its attempt loses the task: its result must not be kept.
        ctx.step("after", _lose_the_task_then_count, ctx, stop)
        return {"epoch": ctx.epoch}
    if ctx.epoch == 1:
        on_another_connection(stop, ctx.task_id)
    if input["write"] == "effect":
        ctx.effect("send", lambda idempotency_key: counted("send"), effect_class="reversible", keyed=True)
    elif input["write"] == "child":
        ctx.spawn("t.child", {"value": 1})
    return {"epoch": ctx.epoch}


def _lose_the_task_then_count(ctx, stop):
    if ctx.epoch == 1:
        on_another_connection(stop, ctx.task_id)
    return counted("after")


def refusals(task_id) -> list:
    return list(AuditEvent.objects.filter(task_id=task_id, kind="write.refused").values_list("actor", "data"))


@pytest.mark.parametrize("write", WRITES)
def test_an_attempt_whose_lease_was_recovered_cannot_write(live, write):
    task_id = submit("replay.fenced", {"by": "recovery", "write": write})

    run()  # attempt 1 is refused; the supervisor's re-queue lets attempt 2 run in the same drain

    assert refusals(task_id) == [("worker:test", {"boundary": "storage", "write": write, "epoch": 1})]
    # Attempt 1 kept nothing after the recovery: only the step it journaled before.
    assert list(Step.objects.filter(task_id=task_id, epoch=1).values_list("name", flat=True)) == ["before"]
    assert not Effect.objects.filter(task_id=task_id, epoch=1).exists()
    assert Task.objects.filter(parent_id=task_id).count() == (1 if write == "child" else 0)
    task = Task.objects.get(id=task_id)
    assert (task.status, task.epoch, task.output) == (states.COMPLETED, 2, {"epoch": 2})
    assert list(
        Attempt.objects.filter(task_id=task_id).order_by("epoch").values_list("epoch", "reason", "end_reason")
    ) == [(1, states.FIRST, "lease_expired"), (2, states.RECOVERY, "complete")]
    assert calls["before"] == 1
    assert not Slot.objects.filter(task__isnull=False).exists()


@pytest.mark.parametrize("write", WRITES)
def test_an_attempt_whose_task_was_cancelled_cannot_write_or_overwrite_the_cancellation(live, write):
    task_id = submit("replay.fenced", {"by": "cancel", "write": write})

    run()

    assert refusals(task_id) == [("worker:test", {"boundary": "storage", "write": write, "epoch": 1})]
    task = Task.objects.get(id=task_id)
    assert (task.status, task.output) == (states.CANCELLED, None)
    assert list(Step.objects.filter(task_id=task_id).values_list("name", flat=True)) == ["before"]
    assert not Effect.objects.filter(task_id=task_id).exists()
    assert not Task.objects.filter(parent_id=task_id).exists()
    assert calls["send"] == 0
    # The refused attempt acknowledged the stop: it ended and gave its slot back.
    assert list(Attempt.objects.filter(task_id=task_id).values_list("epoch", "end_reason")) == [(1, "fenced")]
    assert not Slot.objects.filter(task__isnull=False).exists()
