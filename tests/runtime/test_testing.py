"""The public in-process harness (runtime/testing.py): its worker loop, its clock, its
crashes at the kill points and its approvals helper, under pytest-django's committed
(`transactional_db`) and rolled-back (`db`) tests alike."""

from __future__ import annotations

import collections
import time

import pytest
from django.db import connection
from django.utils import timezone

from runtime import config, states
from runtime.agents import agent
from runtime.models import Effect, Schedule, Task
from runtime.testing import Crashed, StewardTestEnv, StillBusy, clock_skew, install_clock
from runtime.triggers.schedules import schedule_create

DAY = 86_400
calls = collections.Counter()  # how often each step function really ran


receipts: dict[str, str] = {}  # the keyed service's memory: one receipt per key


@pytest.fixture(autouse=True)
def _fresh_counters():
    calls.clear()
    receipts.clear()


def charge_service(amount: int, *, idempotency_key: str) -> str:
    """A service that deduplicates by key: a re-send returns the first call's receipt."""
    calls["charge"] += 1
    return receipts.setdefault(idempotency_key, f"receipt-{len(receipts) + 1}-{amount}")


def counted(name):
    calls[name] += 1
    return calls[name]


@agent("harness.daily")
def daily(ctx, input):
    first = ctx.step("prepare", counted, "prepare")
    ctx.sleep(DAY)
    return {"prepared": first, "sent": ctx.step("send", counted, "send")}


@agent("harness.charge")
def charge(ctx, input):
    ctx.step("prepare", counted, "prepare")
    receipt = ctx.effect("charge", charge_service, 10, effect_class="idempotent", keyed=True)
    ctx.step("notify", counted, "notify")
    return {"receipt": receipt}


@agent("harness.review")
def review(ctx, input):
    decision = ctx.request_approval({"op": "wire", "amount": 10}, effect_class="irreversible", expires_in=3600)
    return {"approved": decision.approved, "state": decision.state, "by": decision.decided_by}


@agent("harness.quick")
def quick(ctx, input):
    return {"n": ctx.step("n", counted, "quick")}


@agent("harness.restless")
def restless(ctx, input):
    for n in range(1000):
        ctx.step(f"n{n}", counted, "n")
        ctx.sleep(0.001)
    return {}


# pytest-django decides which databases to make from the tests' markers and fixtures
# before any fixture runs, so each mode is a marker, not a fixture asked for later.
MODES = [
    pytest.param("committed", marks=pytest.mark.django_db(transaction=True), id="committed"),
    pytest.param("rolled back", marks=pytest.mark.django_db, id="rolled-back"),
]


@pytest.fixture(params=MODES)
def env(request):
    with StewardTestEnv() as steward:
        yield steward


def test_a_day_long_sleep_wakes_when_the_clock_is_advanced_without_waiting(env):
    task = env.submit("harness.daily")
    assert env.run_until_idle() == 1
    slept = env.result(task)
    assert slept.status == states.SLEEPING and (slept.wake_at - env.now()).total_seconds() > DAY - 60
    assert env.run_until_idle() == 0  # nothing is due: idle at once
    started = time.monotonic()
    env.advance(DAY)
    assert env.run_until_idle() == 1
    done = env.result(task)
    assert (done.status, done.output, done.epoch) == (states.COMPLETED, {"prepared": 1, "sent": 1}, 2)
    assert calls == {"prepare": 1, "send": 1}  # the second attempt replayed prepare
    assert [(r.kind, r.name, r.epoch) for r in env.journal(task)] == [
        ("step", "prepare", 1),
        ("sleep", "sleep", 1),
        ("step", "send", 2),
    ]
    assert time.monotonic() - started < 30  # a day passed on the clock, not on the wall


def test_the_clock_moves_for_the_database_and_for_django_together(env):
    before_db, before_py = env.now(), timezone.now()
    env.advance(3 * DAY)
    assert (env.now() - before_db).total_seconds() == pytest.approx(3 * DAY, abs=60)
    assert (timezone.now() - before_py).total_seconds() == pytest.approx(3 * DAY, abs=60)
    with pytest.raises(ValueError, match="only moves forward"):
        env.advance(-1)


def test_leaving_the_harness_puts_the_clock_back(transactional_db):
    with StewardTestEnv() as env:
        env.advance(DAY)
        assert clock_skew() == DAY
    assert clock_skew() == 0
    with connection.cursor() as cur:
        cur.execute("SELECT abs(extract(epoch FROM now() - pg_catalog.now()))")
        assert cur.fetchone()[0] == 0


@pytest.mark.parametrize(
    "point, step, calls_after, sends",
    [
        # The prepare step is journaled, charge not begun: recovery replays prepare and charges once.
        ("between_steps", "prepare", {"prepare": 1, "charge": 1, "notify": 1}, 1),
        # No intent yet: the crash rolled back nothing that matters; charge runs once.
        ("before_effect", "charge", {"prepare": 1, "charge": 1, "notify": 1}, 1),
        # The call was made, no receipt: recovery sends it again (an idempotent effect).
        ("after_effect_before_receipt", "charge", {"prepare": 1, "charge": 2, "notify": 1}, 2),
        # The receipt is committed, the journal row is not: recovery reads the ledger.
        ("after_receipt_before_journal", "charge", {"prepare": 1, "charge": 1, "notify": 1}, 1),
        # The agent returned, its status is not written: recovery replays everything.
        ("before_status", "complete", {"prepare": 1, "charge": 1, "notify": 1}, 1),
    ],
)
def test_a_crash_at_a_kill_point_is_recovered_once_its_lease_lapses(env, point, step, calls_after, sends):
    env.crash_at(point, step=step)
    task = env.submit("harness.charge")
    env.run_until_idle()
    assert [(c.point, c.step, c.epoch) for c in env.crashes] == [(point, step, 1)]
    assert env.result(task).status == states.RUNNING  # its worker is "dead"; the lease holds it
    env.expire_leases()
    env.run_until_idle()
    done = env.result(task)
    assert (done.status, done.epoch) == (states.COMPLETED, 2), done
    assert calls == calls_after
    (effect,) = Effect.objects.filter(task_id=task)
    assert (effect.state, effect.sends) == (states.COMMITTED, sends)
    assert done.output == {"receipt": effect.receipt}
    assert env.events(task).count("task.recovered") == 1


def test_a_crash_inside_a_transaction_rolls_it_back(env):
    env.crash_at("in_effect_intent", step="charge")
    task = env.submit("harness.charge")
    env.run_until_idle()
    assert Effect.objects.filter(task_id=task).count() == 0  # the intent's transaction never committed
    env.expire_leases()
    env.run_until_idle()
    assert env.result(task).status == states.COMPLETED
    assert calls == {"prepare": 1, "charge": 1, "notify": 1}


def test_agent_code_cannot_swallow_a_crash():
    assert not issubclass(Crashed, Exception)


def test_an_unknown_kill_point_is_refused(env):
    with pytest.raises(ValueError, match="unknown kill point"):
        env.crash_at("after_lunch")


def test_a_task_whose_worker_dies_at_every_attempt_is_dead_lettered(env):
    task = env.submit("harness.charge")
    env.crash_at("before_step_journal", step="prepare", task_id=task)
    for epoch in range(1, config.max_crashes() + 1):
        env.run_until_idle()
        assert len(env.crashes) == epoch
        env.rearm()  # the next attempt crashes too
        env.expire_leases()
    env.run_until_idle()
    dead = env.result(task)
    assert (dead.status, dead.epoch) == (states.DEAD, config.max_crashes())
    assert env.events(task).count("task.dead") == 1


def test_an_approval_decided_by_a_person_resumes_the_task(env):
    task = env.submit("harness.review")
    env.run_until_idle()
    blocked = env.result(task)
    assert (blocked.status, blocked.blocked_reason) == (states.BLOCKED, states.APPROVAL_PENDING)
    (pending,) = env.approvals(task)
    assert pending.action == {"op": "wire", "amount": 10}
    env.approve(task, by="user:bob", comment="fine")
    env.run_until_idle()
    assert env.result(task).output == {"approved": True, "state": states.CONSUMED, "by": "user:bob"}
    assert env.approvals(task) == []


def test_a_denied_approval_takes_the_agents_other_branch(env):
    task = env.submit("harness.review")
    env.run_until_idle()
    env.deny(task, by="user:bob")
    env.run_until_idle()
    assert env.result(task).output == {"approved": False, "state": states.DENIED, "by": "user:bob"}


def test_an_approval_nobody_decides_expires_when_the_clock_passes_it(env):
    task = env.submit("harness.review")
    env.run_until_idle()
    env.advance(3599)
    env.run_until_idle()
    assert env.result(task).status == states.BLOCKED
    env.advance(2)
    env.run_until_idle()
    assert env.result(task).output == {"approved": False, "state": states.EXPIRED, "by": None}


def test_approving_a_task_with_nothing_pending_says_so(env):
    task = env.submit("harness.daily")
    with pytest.raises(AssertionError, match="no pending approval"):
        env.approve(task)


def test_a_schedule_fires_at_each_tick_the_clock_passes(env):
    schedule = schedule_create(
        tenant="acme",
        name="every-five",
        agent="harness.quick",
        input={},
        owner="user:alice",
        cron="*/5 * * * *",
        actor="user:alice",
    )
    env.run_until_idle()
    assert Task.objects.filter(agent="harness.quick", status=states.COMPLETED).count() == 0
    first = Schedule.objects.get(id=schedule.id).next_fire_at
    env.advance((first - env.now()).total_seconds() + 1)
    env.run_until_idle()
    assert Task.objects.filter(agent="harness.quick", status=states.COMPLETED).count() == 1
    env.advance(300)
    env.run_until_idle()
    assert Task.objects.filter(agent="harness.quick", status=states.COMPLETED).count() == 2


def test_an_agent_that_keeps_sleeping_briefly_is_reported_busy(transactional_db):
    with StewardTestEnv() as env:
        env.submit("harness.restless")
        with pytest.raises(StillBusy, match="after 3 rounds"):
            for _ in range(100):  # each round's sweep finds the last millisecond's sleep due
                env.run_until_idle(max_rounds=3)
                time.sleep(0.002)


def test_the_clock_is_never_installed_outside_a_test_database(settings, db):
    class Elsewhere:
        settings_dict = {**connection.settings_dict, "NAME": "steward"}

    with pytest.raises(RuntimeError, match="test databases only"):
        install_clock(Elsewhere())
