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

# serial: it restarts and stops a PostgreSQL (its own), and counts the outages each
# process logged, which a statement timeout under a second worker's load adds to.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

TASKS = 50


def _submit(env: dict, count: int, payload: dict) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.faults.submit", "t.paced", str(count), json.dumps(payload)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _statuses(pg: PrivatePostgres) -> dict:
    return dict(pg.query("SELECT status, count(*) FROM steward_task GROUP BY status"))


OUTAGES = {
    "restart": lambda pg: pg.restart(),
    # Longer than a lease: yields cannot land, leases lapse, and recovery takes over.
    "down for 5s": lambda pg: pg.down(5),
}
STRESS_ROUNDS = 20


def run_rounds(child_env, fake, outage: str, rounds: int, tasks: int) -> list[str]:
    """`rounds` outages, each while `tasks` new tasks are in flight; returns a line per round."""
    pg = PrivatePostgres().start()
    env = pg.env(child_env, STEWARD_QUEUE=f"{QUEUE}-pg-restart")
    fleet = Fleet(env, credentials=False)  # its agents call no gateway
    lines = []
    try:
        pg.migrate(env)
        workers = fleet.workers(2)
        fleet.supervisors(1)
        fleet.beat(pg.root / "beat-schedule")
        submitted: list[str] = []
        for round_ in range(rounds):
            submitted += _submit(env, tasks, {"url": fake.url, "pause": 0.05})
            done_before = len(submitted) - tasks
            wait_until(
                lambda: _statuses(pg).get("completed", 0) >= done_before + tasks // 5,
                timeout=60,
                message="a fifth of the round's tasks to complete before the outage",
            )
            started = time.monotonic()
            OUTAGES[outage](pg)
            back = time.monotonic()
            unfinished = len(submitted) - _statuses(pg).get("completed", 0)
            wait_until(
                lambda: _statuses(pg).get("completed", 0) == len(submitted),
                timeout=120,
                interval=0.2,
                message="every task to complete after the outage",
            )
            lines.append(
                f"round {round_}: outage {back - started:.1f}s, {unfinished} unfinished at its end, "
                f"all done {time.monotonic() - back:.1f}s after it"
            )

        ends = dict(pg.query("SELECT end_reason, count(*) FROM steward_attempt GROUP BY end_reason"))
        failed_ever = pg.query("SELECT count(*) FROM steward_audit WHERE kind = 'task.failed'")[0][0]
        wait_until(
            lambda: pg.query("SELECT count(*) FROM steward_slot WHERE task_id IS NOT NULL")[0][0] == 0,
            timeout=30,
            message="every slot to be free",
        )
        performed = fake.performed_by_key()
        print(f"\n[postgres {outage}] {rounds} rounds of {tasks} tasks; attempt ends {ends}\n  " + "\n  ".join(lines))

        assert _statuses(pg) == {"completed": len(submitted)} and failed_ever == 0
        assert len(performed) == len(submitted) and set(performed.values()) == {1}, performed  # 0 duplicates
        assert sorted(pg.query("SELECT id::text FROM steward_task")) == sorted((i,) for i in submitted)
        assert all(process.alive() for process in fleet.processes), [p.name for p in fleet.processes if not p.alive()]
        for worker in workers:
            worker.wait_ready(timeout=20)  # still consuming, not just alive
        for process in fleet.processes:
            log = process.output()
            assert "Traceback" not in log, f"{process.name}:\n{log[-3000:]}"
            # Each outage is logged when it begins and when it ends, not once per retry.
            assert log.count("database unavailable") == log.count("database back after") <= 2 * rounds, log[-3000:]
    finally:
        fleet.stop_all()
        pg.stop()
    return lines


@pytest.mark.parametrize("outage", OUTAGES)
def test_a_postgresql_outage_mid_run_loses_nothing_and_stops_no_process(child_env, fake, outage):
    assert len(run_rounds(child_env, fake, outage, rounds=1, tasks=TASKS)) == 1


@pytest.mark.stress
@pytest.mark.parametrize("outage", OUTAGES)
def test_many_postgresql_outages_lose_nothing_and_stop_no_process(child_env, fake, outage):
    assert len(run_rounds(child_env, fake, outage, rounds=STRESS_ROUNDS, tasks=20)) == STRESS_ROUNDS
