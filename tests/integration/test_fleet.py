"""The fleet (runtime/fleet/): real worker and supervisor processes say they are alive and
what they did, and stop being alive once they stop beating. Nothing here decides what
runs; this is what the dashboard, health and /metrics read."""

from __future__ import annotations

import pytest

from runtime import db, states
from runtime.fleet.selectors import fleet as fleet_now
from runtime.fleet.selectors import health, throughput
from runtime.models import Process, Task
from tests.faults.support import submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


def _live(kind: str) -> dict[int, object]:
    return {p.process.pid: p for p in fleet_now(kind=kind) if p.alive}


def test_workers_and_supervisors_are_seen_alive_counted_and_dropped_when_they_stop(live, fleet):
    fleet_of = fleet
    workers = fleet_of.workers(2)
    (supervisor,) = fleet_of.supervisors(1)
    wait_until(
        lambda: set(_live("worker")) >= {w.pid for w in workers} and supervisor.pid in _live("supervisor"),
        timeout=60,
        message="both workers and the supervisor to beat",
    )
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
    wait_until(
        lambda: workers[0].pid not in _live("worker"),
        timeout=10,
        message="the killed worker to stop being alive after a lease",
    )
    assert workers[1].pid in _live("worker")
    assert Process.objects.filter(pid=workers[0].pid, stopped_at__isnull=True).exists()  # gone, not stopped

    workers[1].stop()  # a warm shutdown says so
    wait_until(
        lambda: Process.objects.filter(pid=workers[1].pid, stopped_at__isnull=False).exists(),
        timeout=15,
        message="the stopped worker to record its stop",
    )


def test_under_make_runs_topology_beat_sweeps_on_the_workers_and_the_dashboard_sees_them_at_once(
    live, fleet, settings, tmp_path
):
    """`make run` runs workers and Celery beat, no `steward supervise`: the sweeps beat sends
    run on the workers, and health must say so (healthy, swept by a worker) as soon as the
    first sweep ran, not a heartbeat interval later. A 240 s lease makes the interval 80 s:
    a worker's first regular beat after its startup beat comes 80 s after that one (its
    row's started_at, on the database's clock), so health seen healthy within 70 s of the
    first worker's startup beat can only be the nudge after a worker's first sweep. The
    bound leaves beat 70 s to start, however slowly the workers themselves started."""
    slow = {"STEWARD_LEASE_SECONDS": "240", "STEWARD_HEARTBEAT_SECONDS": "0"}
    settings.STEWARD = {**settings.STEWARD, "LEASE_SECONDS": 240.0, "HEARTBEAT_SECONDS": 0.0}
    workers = fleet.workers(2, env=slow)
    wait_until(lambda: set(_live("worker")) >= {w.pid for w in workers}, message="both workers' first beats")
    assert health().last_sweep_at is None  # nothing has swept yet: no beat, no supervisor
    first_beat = min(Process.objects.filter(pid__in=[w.pid for w in workers]).values_list("started_at", flat=True))
    fleet.beat(tmp_path / "beat-schedule", env=slow)
    wait_until(lambda: health().ok, timeout=75, message="health to see beat's first sweep")
    took = (db.clock() - first_beat).total_seconds()
    assert took < 70.0, f"the first sweep reached health {took:.1f} s after the first worker's beat (heartbeat: 80 s)"
    report = health()
    assert report.live_supervisors == 0 and report.live_workers == 2
    assert report.last_sweep_by in {f"worker:{p.process.host}:{p.process.pid}" for p in _live("worker").values()}

    ids = [submit("t.steps", {"n": 2}).task_id for _ in range(10)]
    wait_until(
        lambda: Task.objects.filter(id__in=ids, status=states.COMPLETED).count() == len(ids),
        timeout=30,
        message="the ten tasks to complete",
    )
    wait_until(
        lambda: sum(m.finished for m in throughput(minutes=5)) >= len(ids),
        timeout=100,
        message="the workers' next beats to count the ten tasks for the dashboard",
    )


def test_the_workers_count_each_tenants_work_apart_and_carol_sees_only_globexs_last_hour(live, fleet):
    """Real workers run tasks of two tenants; their beats keep each tenant's minute apart,
    the fleet's is the sum, and carol's dashboard (globex) shows globex's figures only."""
    from django.test import Client

    from runtime.tasks.services import task_submit
    from tests.people import make_people

    people = make_people()
    fleet.workers(2)
    acme_ids = [submit("t.steps", {"n": 3}).task_id for _ in range(6)]
    globex_ids = [
        task_submit(agent="t.steps", input={"n": 1}, tenant="globex", owner="user:carol", actor="user:carol").task_id
        for _ in range(2)
    ]

    def totals(tenant=None):
        minutes = throughput(minutes=5, tenant=tenant)
        return sum(m.finished for m in minutes), sum(m.steps for m in minutes), sum(sum(m.waits) for m in minutes)

    # t.steps with n steps journals n + 1 rows (docs: the demo agents); each task is claimed once at least.
    wait_until(
        lambda: totals("acme")[:2] == (6, 6 * 4) and totals("globex")[:2] == (2, 2 * 2),
        timeout=30,
        message="the workers' beats to count each tenant's tasks and steps",
    )
    assert Task.objects.filter(id__in=[*acme_ids, *globex_ids], status=states.COMPLETED).count() == 8
    assert totals("acme")[2] >= 6 and totals("globex")[2] >= 2
    assert totals()[:2] == (8, 6 * 4 + 2 * 2)  # the fleet's: both tenants' (this test's database holds no other)

    carol = Client()
    carol.force_login(people.carol)
    for html in (carol.get("/").content.decode(), carol.get("/live/", headers={"HX-Request": "true"}).content.decode()):
        assert 'id="tenant-hour" data-finished="2" data-failed="0" data-steps="4"' in html
        assert "globex's tasks: 2 finished" in html and "whole fleet" not in html
