"""The broker loses its messages (FLUSHALL) or goes away for 10 s while tasks are in
flight. Celery is transport only, so neither costs a task: the supervisor re-sends a
wake-up for queued work nobody picked up, and the workers reconnect on their own.
Each test measures and reports how long recovery took.

The Redis here is this test's own (tests/faults/services.py), on a fixed port that
survives the restart, so the session's broker is never touched.
"""

from __future__ import annotations

import time

import pytest

from runtime import states
from runtime.models import AuditEvent, Task
from tests.conftest import TIMING
from tests.faults.services import PrivateRedis
from tests.faults.support import held_slots, submit, wait_nothing_held
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]

TASKS = 30
OUTAGE = 10.0  # seconds the broker is down
STRESS_ROUNDS = 20


@pytest.fixture
def broker(tmp_path, settings):
    redis = PrivateRedis(tmp_path).start()
    # This process's wake-ups go to the private broker too (runtime/attempts/dispatch.py).
    settings.CELERY_BROKER_URL = redis.url
    yield redis
    redis.stop()


def _completed(ids) -> int:
    return Task.objects.filter(id__in=ids, status=states.COMPLETED).count()


def _workers(fleet, broker, n: int = 2):
    workers = fleet.workers(n, env={"REDIS_URL": broker.url}, wait=False)
    for worker in workers:
        worker.wait_ready(broker_url=broker.url)
    return workers


def _verdict(processes, ids, fake):
    assert Task.objects.filter(id__in=ids).exclude(status=states.COMPLETED).count() == 0
    assert not AuditEvent.objects.filter(task_id__in=ids, kind="task.failed").exists()
    performed = fake.performed_by_key()
    assert len(performed) == len(ids) and set(performed.values()) == {1}
    wait_nothing_held()
    assert held_slots() == []
    assert all(process.alive() for process in processes), [p.name for p in processes if not p.alive()]


def flush_rounds(fleet, fake, broker, rounds: int) -> list[float]:
    """Each round: the wake-ups for 30 queued tasks are flushed before any worker saw
    them (no worker runs until after the flush: a stopped one would still have been
    handed messages by Redis). Returns each round's time from the workers being ready
    to the last completion."""
    (supervisor,) = fleet.supervisors(1, env={"REDIS_URL": broker.url})
    recoveries, ids = [], []
    for _ in range(rounds):
        batch = [submit("t.paced", {"url": fake.url, "pause": 0.01}).task_id for _ in range(TASKS)]
        ids += batch
        assert broker.client().llen(settings_queue()) >= 1
        broker.client().flushall()  # every wake-up is gone
        flushed = time.monotonic()
        workers = _workers(fleet, broker)
        wait_until(lambda: _completed(batch) == TASKS, timeout=60, interval=0.1, message="every task to complete")
        recoveries.append(time.monotonic() - flushed)
        for worker in workers:
            worker.kill()
    assert supervisor.output().count('"redispatched": 1') >= rounds
    _verdict([supervisor], ids, fake)
    print(
        f"\n[broker flushed] {rounds} rounds of {TASKS} tasks; all completed {min(recoveries):.1f}-"
        f"{max(recoveries):.1f}s after the flush, two workers' start-up included (the supervisor re-sends "
        f"after {TIMING['STEWARD_REDISPATCH_SECONDS']}s)"
    )
    return recoveries


def outage_rounds(fleet, fake, broker, rounds: int) -> list[float]:
    """Each round: tasks sleep through a 10 s outage (their timers fire while it lasts,
    so their wake-ups cannot be sent) and more are submitted during it. Returns each
    round's time from the restart to the last completion."""
    workers = _workers(fleet, broker)
    fleet.supervisors(1, env={"REDIS_URL": broker.url})
    fleet.beat(broker.root / "beat-schedule", env={"REDIS_URL": broker.url})
    napping = {"url": fake.url, "seconds": 2, "delay": 0.01}
    recoveries, ids = [], []
    for _ in range(rounds):
        batch = [submit("t.nap_then_busy", napping).task_id for _ in range(TASKS // 2)]
        wait_until(
            lambda: Task.objects.filter(id__in=batch, status=states.SLEEPING).count() == len(batch),
            timeout=30,
            message="the first half to be asleep",
        )
        broker.stop()
        stopped = time.monotonic()
        batch += [submit("t.nap_then_busy", napping).task_id for _ in range(TASKS // 2)]  # wake-ups lost
        time.sleep(max(0.0, stopped + OUTAGE - time.monotonic()))  # the rest of the outage
        assert _completed(batch) == 0, "a task completed without its wake-up"
        broker.start()
        restarted = time.monotonic()
        wait_until(lambda: _completed(batch) == TASKS, timeout=90, interval=0.1, message="every task to complete")
        recoveries.append(time.monotonic() - restarted)
        ids += batch
        for worker in workers:
            worker.wait_ready(timeout=30, broker_url=broker.url)  # consuming again, not just alive
    _verdict(fleet.processes, ids, fake)
    print(
        f"\n[broker down {OUTAGE:.0f}s] {rounds} rounds of {TASKS} tasks; all completed after the restart in "
        f"{min(recoveries):.1f}-{max(recoveries):.1f}s"
    )
    return recoveries


def test_a_flushed_broker_loses_no_task(live, fleet, fake, broker):
    assert len(flush_rounds(fleet, fake, broker, 1)) == 1


def test_a_broker_down_for_ten_seconds_loses_no_task_and_stops_no_process(live, fleet, fake, broker):
    assert len(outage_rounds(fleet, fake, broker, 1)) == 1


@pytest.mark.stress
def test_many_broker_flushes_lose_no_task(live, fleet, fake, broker):
    assert len(flush_rounds(fleet, fake, broker, STRESS_ROUNDS)) == STRESS_ROUNDS


@pytest.mark.stress
def test_many_broker_outages_lose_no_task(live, fleet, fake, broker):
    assert len(outage_rounds(fleet, fake, broker, STRESS_ROUNDS)) == STRESS_ROUNDS


def settings_queue() -> str:
    from runtime import config

    return config.queue_name()
