"""PostgreSQL restarts (`pg_ctl restart -m fast`: every connection terminated) while 50
tasks are in flight on two workers, with a `steward supervise` process and Celery beat
running. Every task completes, no keyed effect is performed twice, no task fails with an
infrastructure error, no slot stays held, and every process is still running, having
logged the outage instead of a traceback per retry.

The restart is of a PostgreSQL of this test's own (tests/faults/services.py): the
session's server is shared with every other test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import QUEUE
from tests.faults.services import PrivatePostgres
from tests.harness import REPO, Fleet, wait_until

pytestmark = [pytest.mark.integration]

TASKS = 50


def _submit(env: dict, count: int, payload: dict) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "tests.faults.submit", "t.paced", str(count), json.dumps(payload)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _statuses(pg: PrivatePostgres) -> dict:
    return dict(pg.query("SELECT status, count(*) FROM steward_task GROUP BY status"))


OUTAGES = {
    "restart": lambda pg: pg.restart(),
    # Longer than a lease: yields cannot land, leases lapse, and recovery takes over.
    "down for 5s": lambda pg: pg.down(5),
}


@pytest.mark.parametrize("outage", OUTAGES)
def test_a_postgresql_outage_mid_run_loses_nothing_and_stops_no_process(child_env, fake, tmp_path, outage):
    pg = PrivatePostgres().start()
    env = {**child_env, "DATABASE_URL": pg.url, "STEWARD_QUEUE": f"{QUEUE}-pg-restart"}
    fleet = Fleet(env)
    try:
        pg.migrate(env)
        workers = fleet.workers(2)
        fleet.supervisors(1)
        fleet.beat(tmp_path / "beat-schedule")
        ids = _submit(env, TASKS, {"url": fake.url, "pause": 0.05})
        wait_until(lambda: _statuses(pg).get("completed", 0) >= 10, timeout=60,
                   message="a fifth of the tasks to complete before the restart")

        restarted = time.monotonic()
        OUTAGES[outage](pg)
        back = time.monotonic()
        in_flight_at_restart = TASKS - _statuses(pg).get("completed", 0)
        wait_until(lambda: _statuses(pg).get("completed", 0) == TASKS, timeout=120, interval=0.2,
                   message="every task to complete after the restart")
        all_done = time.monotonic()

        statuses = _statuses(pg)
        ends = dict(pg.query("SELECT end_reason, count(*) FROM steward_attempt GROUP BY end_reason"))
        failed_ever = pg.query("SELECT count(*) FROM steward_audit WHERE kind = 'task.failed'")[0][0]
        wait_until(lambda: pg.query("SELECT count(*) FROM steward_slot WHERE task_id IS NOT NULL")[0][0] == 0,
                   timeout=30, message="every slot to be free")
        performed = fake.performed_by_key()
        print(f"\n[postgres {outage}] the outage took {back - restarted:.1f}s; {in_flight_at_restart} tasks unfinished "
              f"at its start; all {TASKS} completed {all_done - back:.1f}s after it ended; attempt ends {ends}")

        assert statuses == {"completed": TASKS} and failed_ever == 0
        assert len(performed) == TASKS and set(performed.values()) == {1}, performed  # 0 duplicate effects
        assert sorted(pg.query("SELECT id::text FROM steward_task WHERE parent_id IS NULL")) == sorted((i,) for i in ids)
        assert all(process.alive() for process in fleet.processes), [p.name for p in fleet.processes if not p.alive()]
        for worker in workers:
            worker.wait_ready(timeout=20)  # still consuming, not just alive
        for process in fleet.processes:
            log = process.output()
            assert "Traceback" not in log, f"{process.name}:\n{log[-3000:]}"
            # Each outage is logged when it begins and when it ends, not once per retry.
            assert log.count("database unavailable") == log.count("database back after") <= 2, log[-3000:]
    finally:
        fleet.stop_all()
        pg.stop()
