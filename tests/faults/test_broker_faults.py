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


@pytest.fixture
def broker(tmp_path, settings):
    redis = PrivateRedis(tmp_path).start()
    # This process's wake-ups go to the private broker too (runtime/dispatch.py).
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


def _verdict(fleet, ids, fake):
    assert Task.objects.filter(id__in=ids).exclude(status=states.COMPLETED).count() == 0
    assert not AuditEvent.objects.filter(task_id__in=ids, kind="task.failed").exists()
    performed = fake.performed_by_key()
    assert len(performed) == len(ids) and set(performed.values()) == {1}
    wait_nothing_held()
    assert held_slots() == []
    assert all(process.alive() for process in fleet.processes), [p.name for p in fleet.processes if not p.alive()]


def test_a_flushed_broker_loses_no_task(live, fleet, fake, broker):
    """The wake-ups for 30 queued tasks are flushed before any worker saw them."""
    (supervisor,) = fleet.supervisors(1, env={"REDIS_URL": broker.url})
    ids = [submit("t.paced", {"url": fake.url, "pause": 0.01}).task_id for _ in range(TASKS)]
    queued_messages = broker.client().llen(settings_queue())
    broker.client().flushall()  # every wake-up is gone
    flushed = time.monotonic()
    _workers(fleet, broker)
    wait_until(lambda: _completed(ids) == TASKS, timeout=60, interval=0.1, message="every task to complete")
    recovery = time.monotonic() - flushed
    print(f"\n[broker flushed] {queued_messages} wake-ups flushed; all {TASKS} completed {recovery:.1f}s later "
          f"(the supervisor re-sends after {TIMING['STEWARD_REDISPATCH_SECONDS']}s)")
    assert queued_messages >= 1
    assert '"redispatched": 1' in supervisor.output()
    _verdict(fleet, ids, fake)


def test_a_broker_down_for_ten_seconds_loses_no_task_and_stops_no_process(live, fleet, fake, broker):
    """Tasks sleep through the outage (their timers fire while it lasts, so their
    wake-ups cannot be sent) and more are submitted during it."""
    workers = _workers(fleet, broker)
    fleet.supervisors(1, env={"REDIS_URL": broker.url})
    fleet.beat(broker.root / "beat-schedule", env={"REDIS_URL": broker.url})
    napping = {"url": fake.url, "seconds": 2, "delay": 0.01}
    ids = [submit("t.nap_then_busy", napping).task_id for _ in range(TASKS // 2)]
    wait_until(lambda: Task.objects.filter(id__in=ids, status=states.SLEEPING).count() == len(ids), timeout=30,
               message="the first half to be asleep")
    broker.stop()
    stopped = time.monotonic()
    ids += [submit("t.nap_then_busy", napping).task_id for _ in range(TASKS // 2)]  # their wake-ups are lost
    time.sleep(max(0.0, stopped + OUTAGE - time.monotonic()))  # the rest of the outage
    at_restart = _completed(ids)
    broker.start()
    restarted = time.monotonic()
    wait_until(lambda: _completed(ids) == TASKS, timeout=90, interval=0.1, message="every task to complete")
    recovery = time.monotonic() - restarted
    print(f"\n[broker down {OUTAGE:.0f}s] {at_restart}/{TASKS} completed during the outage; all {TASKS} "
          f"{recovery:.1f}s after the restart")
    assert at_restart == 0
    for worker in workers:
        worker.wait_ready(timeout=30, broker_url=broker.url)  # consuming again, not just alive
    _verdict(fleet, ids, fake)


def settings_queue() -> str:
    from runtime import config

    return config.queue_name()
