"""Cron across a restart of every process: real `steward supervise` processes and a real
worker, all SIGKILLed around a tick and started again. Each round, the tick runs once:
not zero times (lost with the processes) and not twice (fired again after the restart)."""

from __future__ import annotations

import datetime as dt
import random
import time

import pytest

from runtime import db, states
from runtime.models import Attempt, Schedule, Task
from runtime.triggers.services import schedule_create, tick_key
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
ROUNDS = 4
JITTER = random.Random(10)  # seeded: a failing run can be repeated


def db_now() -> dt.datetime:
    return dt.datetime.fromtimestamp(db.fetchone("clock", {"seconds": 0})[0], dt.UTC)


def test_a_tick_runs_once_across_a_restart_of_every_process(live, fleet):
    # Yearly: the only ticks that come due during the test are the ones set below.
    schedule = schedule_create(name="restarts", agent="t.steps", input={"n": 1}, cron="0 0 1 1 *", **ALICE)
    fleet.workers(1)
    for round_ in range(ROUNDS):
        fleet.supervisors(2, interval=0.05)
        tick = (db_now() + dt.timedelta(seconds=1)).replace(microsecond=0)
        Schedule.objects.filter(id=schedule.id).update(next_fire_at=tick)
        # Kill everything just before, at or just after the tick, so that some rounds cut
        # a firing short and others find it done; then wait, with nothing running, until
        # the tick is well past, and start everything again.
        time.sleep(max(0.0, (tick - db_now()).total_seconds() + JITTER.uniform(-0.2, 0.3)))
        fleet.stop_all()
        time.sleep(0.5)
        fleet.workers(1)
        fleet.supervisors(2, interval=0.05)
        key = tick_key(schedule.id, tick)
        done = wait_until(
            lambda: Task.objects.filter(idempotency_key=key, status=states.COMPLETED).first(),
            timeout=30,
            message=f"round {round_}: the tick's task to complete",
        )
        assert Task.objects.filter(idempotency_key=key).count() == 1
        assert Attempt.objects.filter(task_id=done.id, end_reason="complete").count() == 1
        moved = Schedule.objects.get(id=schedule.id)
        assert moved.next_fire_at > tick and moved.last_task_id == done.id
        fleet.stop_all()
    assert Task.objects.filter(idempotency_key__startswith=f"schedule:{schedule.id}:").count() == ROUNDS


def test_a_supervisor_killed_inside_the_firing_transaction_loses_nothing(live, fleet, tmp_path):
    """The supervisor holds still with the tick moved on and the task submitted but not
    committed; every process is SIGKILLed there. Nothing of that firing survives, and the
    restarted supervisors fire the tick once."""
    from tests.faults.support import armed, marker_path, read_marker

    schedule = schedule_create(name="held", agent="t.steps", input={"n": 1}, cron="0 0 1 1 *", **ALICE)
    fleet.workers(1)
    fleet.supervisors(1, interval=0.05, env=armed(tmp_path, "in_schedule_fire"))
    tick = (db_now() + dt.timedelta(seconds=0.5)).replace(microsecond=0) + dt.timedelta(seconds=1)
    Schedule.objects.filter(id=schedule.id).update(next_fire_at=tick)
    wait_until(
        lambda: read_marker(marker_path(tmp_path, schedule.id, "in_schedule_fire@fire")),
        timeout=20,
        message="the supervisor to hold inside the firing transaction",
    )
    fleet.stop_all()
    key = tick_key(schedule.id, tick)
    assert not Task.objects.filter(idempotency_key=key).exists()  # rolled back with the process
    assert Schedule.objects.get(id=schedule.id).next_fire_at == tick  # still due
    fleet.workers(1)
    fleet.supervisors(2, interval=0.05)
    done = wait_until(
        lambda: Task.objects.filter(idempotency_key=key, status=states.COMPLETED).first(),
        timeout=30,
        message="the tick's task to complete after the restart",
    )
    assert Task.objects.filter(idempotency_key__startswith=f"schedule:{schedule.id}:").count() == 1
    assert Attempt.objects.filter(task_id=done.id, end_reason="complete").count() == 1
