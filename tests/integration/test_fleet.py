"""The fleet (runtime/fleet/): real worker and supervisor processes say they are alive and
what they did, and stop being alive once they stop beating. Nothing here decides what
runs; this is what the dashboard, health and /metrics read."""

from __future__ import annotations

import pytest

from runtime.fleet.selectors import fleet as fleet_now
from runtime.fleet.selectors import health, throughput
from runtime.models import Process
from tests.faults.support import submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


def _live(kind: str) -> dict[int, object]:
    return {p.process.pid: p for p in fleet_now(kind=kind) if p.alive}


def test_workers_and_supervisors_are_seen_alive_counted_and_dropped_when_they_stop(live, fleet):
    fleet_of = fleet
    workers = fleet_of.workers(2)
    (supervisor,) = fleet_of.supervisors(1)
    wait_until(lambda: set(_live("worker")) >= {w.pid for w in workers} and supervisor.pid in _live("supervisor"),
               message="both workers and the supervisor to beat")
    ids = [submit("t.steps", {"n": 3}).task_id for _ in range(20)]

    def counted():
        minutes = throughput(minutes=5)
        return sum(m.finished for m in minutes) >= 20 and sum(m.steps for m in minutes) >= 20 * 4
    wait_until(counted, timeout=30, message="the workers' beats to count 20 finished tasks and their steps")
    minutes = throughput(minutes=5)
    assert len(minutes) == 5 and [m.minute for m in minutes] == sorted(m.minute for m in minutes)
    claims = sum(sum(m.waits) for m in minutes)
    assert claims >= len(ids)
    assert max(m.wait_quantile(0.5) or 0 for m in minutes) > 0
    totals = {p.process.pid: p.process.counters for p in fleet_now(kind="worker")}
    assert sum(c.get("completed", 0) for c in totals.values()) >= 20

    report = health()
    assert report.ok and report.live_workers >= 2 and report.live_supervisors >= 1
    assert report.database_ms is not None and report.broker_ms is not None
    assert report.sweep_age_seconds is not None and report.sweep_age_seconds < 5

    workers[0].kill()  # no warm shutdown: the row just stops being refreshed
    wait_until(lambda: workers[0].pid not in _live("worker"), timeout=10,
               message="the killed worker to stop being alive after a lease")
    assert workers[1].pid in _live("worker")
    assert Process.objects.filter(pid=workers[0].pid, stopped_at__isnull=True).exists()  # gone, not stopped

    workers[1].stop()  # a warm shutdown says so
    wait_until(lambda: Process.objects.filter(pid=workers[1].pid, stopped_at__isnull=False).exists(),
               timeout=15, message="the stopped worker to record its stop")
