"""The dense worker (runtime/worker/dense.py, docs/adr/0033-dense-worker.md) on real
processes: one `celery worker` runs many attempts at once, each fenced, leased, stopped
and recovered on its own.

t.stoppable (tests/agents.py) runs `first`, then `block` as the test asks (`stream`:
short waits, as agent code reading a model stream; `shrug`: swallows every stop), then
`next`; `block` marks a file in the task's directory as it starts, so the tests wait for
files, never for a fixed time.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from runtime import states
from runtime.models import Attempt, Step, Task
from runtime.stops.services import task_stop
from tests.concurrency import Sampler
from tests.faults.support import held_slots, submit, wait_nothing_held
from tests.harness import race, wait_until
from tests.pools import pool_with
from tests.stops import acks, cancelled, since_stop

# serial: wall-clock bounds (a stop within 1 s, a takeover within lease + sweep + 1 s).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

ACTOR = "user:alice"
PLACES = 8
# A pool of 3 connections for 8 attempts: were a connection held while agent code waits,
# the fourth attempt would wait for one instead of running (STEWARD_DB_POOL_TIMEOUT).
DENSE = {"STEWARD_WORKER_ATTEMPTS": str(PLACES), "STEWARD_DB_POOL_MAX": "3", "STEWARD_DB_POOL_TIMEOUT": "30"}
LEASE, SWEEP = 2.0, 0.2  # tests/conftest.py TIMING


def _stream(tmp_path: Path, n: int, *, seconds: float = 60, how: str = "stream") -> list[tuple[object, Path]]:
    """Submit n t.stoppable tasks whose `block` step waits `seconds`; (task id, its dir)."""
    started = []
    for i in range(n):
        directory = tmp_path / f"t{i}"
        directory.mkdir()
        task = submit("t.stoppable", {"dir": str(directory), "how": how, "seconds": seconds})
        started.append((task.task_id, directory))
    return started


def _all_blocking(tasks) -> None:
    wait_until(
        lambda: all((d / "block").exists() for _, d in tasks),
        timeout=30,
        message=f"{len(tasks)} attempts in their block step at once",
    )


def _live(task_id) -> Attempt:
    return Attempt.objects.get(task_id=task_id, ended_at__isnull=True)


def _connections(pid: int) -> int:
    """The PostgreSQL connections process `pid` holds now (console/env.py names each
    connection's application after its process)."""
    name = f"steward:{pid}"
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name])
        return cur.fetchone()[0]


def test_one_dense_worker_runs_many_attempts_at_once_with_few_connections(live, fleet, tmp_path):
    (worker,) = fleet.workers(1, env=DENSE)
    tasks = _stream(tmp_path, PLACES, seconds=3)
    _all_blocking(tasks)

    attempts = [_live(task_id) for task_id, _ in tasks]
    assert {a.worker.rpartition(":")[2] for a in attempts} == {str(worker.pid)}
    # No connection is held while agent code waits: 8 attempts ran on a pool of 3 (plus
    # the stop watcher's listener), and none waited for a connection to get here.
    held = _connections(worker.pid)
    print(f"\n{PLACES} attempts at once in one process: {held} PostgreSQL connections, {worker.rss() >> 20} MB RSS")
    assert 1 <= held <= 3 + 1

    done = wait_until(
        lambda: Task.objects.filter(id__in=[t for t, _ in tasks], status=states.COMPLETED).count() == PLACES,
        timeout=30,
        message="every attempt to complete",
    )
    assert done
    for task_id, _ in tasks:
        assert list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("name", flat=True)) == [
            "first",
            "block",
            "next",
        ]
    wait_nothing_held()


def test_one_heartbeat_statement_renews_the_lease_of_every_attempt(live, fleet, tmp_path):
    """One statement per heartbeat: every lease it renews carries its one now()."""
    fleet.workers(1, env=DENSE)
    tasks = _stream(tmp_path, PLACES, seconds=30)
    _all_blocking(tasks)
    ids = [t for t, _ in tasks]

    def renewed_together():
        live_attempts = list(Attempt.objects.filter(task_id__in=ids, ended_at__isnull=True))
        beats = {a.heartbeat_at for a in live_attempts}
        return len(live_attempts) == PLACES and all(a.heartbeat_at > a.started_at for a in live_attempts) and beats

    first = wait_until(renewed_together, timeout=10, message="a renewal of every lease")
    assert len(first) == 1, f"the leases were renewed at {len(first)} different times"
    second = wait_until(lambda: (b := renewed_together()) and b != first and b, timeout=10, message="the next renewal")
    assert len(second) == 1
    for task_id in ids:
        task_stop(task_id=task_id, actor=ACTOR, reason="the test is done")
    for task_id in ids:
        cancelled(task_id, timeout=10)


def test_a_stop_of_one_attempt_ends_it_alone_within_its_bound(live, fleet, tmp_path):
    (worker,) = fleet.workers(1, env=DENSE)
    tasks = _stream(tmp_path, PLACES, seconds=60)
    _all_blocking(tasks)
    (stopped, _), others = tasks[3], tasks[:3] + tasks[4:]

    task_stop(task_id=stopped, actor=ACTOR, reason="stop one of eight")
    task = cancelled(stopped, timeout=5)

    ack = acks(stopped)[states.WORKER]
    assert (ack.detail["ended"], ack.detail["at"]) == ("cleanly", "in agent code")
    to_ack = since_stop(task, ack.at)
    print(f"\none of {PLACES}: stop -> worker ack {to_ack * 1000:.0f} ms")
    assert to_ack < 1.0
    assert Attempt.objects.get(task_id=stopped).end_reason == "stopped"
    assert not (tmp_path / "t3" / "next").exists()
    # The other seven run on, in the same process, their leases still renewed.
    before = {t: _live(t).lease_expires_at for t, _ in others}
    wait_until(lambda: all(_live(t).lease_expires_at > before[t] for t, _ in others), timeout=5, message="renewals")
    assert Task.objects.filter(id__in=[t for t, _ in others], status=states.RUNNING).count() == PLACES - 1
    assert worker.alive()
    for task_id, _ in others:
        task_stop(task_id=task_id, actor=ACTOR, reason="the test is done")
    for task_id, _ in others:
        cancelled(task_id, timeout=10)
    wait_nothing_held()


def test_a_step_that_ignores_its_stop_is_released_by_force_and_the_others_run_on(live, fleet, tmp_path):
    """A dense worker cannot end its process for one attempt: it releases it by force,
    abandons its thread, and gives its place to the next task."""
    (worker,) = fleet.workers(1, env={**DENSE, "STEWARD_STOP_GRACE_SECONDS": "1"})
    tasks = _stream(tmp_path, PLACES, seconds=60)
    _all_blocking(tasks)
    (stubborn_dir := tmp_path / "stubborn").mkdir()
    # Every place is taken: the stubborn task waits for one (the process claims nothing).
    stubborn = submit("t.stoppable", {"dir": str(stubborn_dir), "how": "shrug"}).task_id
    (freed, _), others = tasks[0], tasks[1:]
    task_stop(task_id=freed, actor=ACTOR, reason="make a place")
    cancelled(freed, timeout=5)
    wait_until((stubborn_dir / "block").exists, timeout=10, message="the stubborn step to start")

    task_stop(task_id=stubborn, actor=ACTOR, reason="it swallows the stop")
    task = cancelled(stubborn, timeout=10)

    ack = acks(stubborn)[states.WORKER]
    assert ack.detail["ended"] == "by force"
    assert 1.0 <= ack.detail["after_seconds"] < 2.0
    assert (stubborn_dir / "shrugged").exists(), "the stop was delivered and swallowed"
    assert Attempt.objects.get(task_id=stubborn).end_reason == "forced"
    print(f"\nforced (dense): stop -> worker ack {since_stop(task, ack.at) * 1000:.0f} ms")
    # The process lives on with its other attempts, and the abandoned place is free again.
    assert worker.alive()
    assert Task.objects.filter(id__in=[t for t, _ in others], status=states.RUNNING).count() == PLACES - 1
    after = submit("t.steps", {"n": 1}).task_id
    done = wait_until(
        lambda: Task.objects.filter(id=after, status=states.COMPLETED).first(), timeout=15, message="the next task"
    )
    assert done.output["pid"] == worker.pid
    for task_id, _ in others:
        task_stop(task_id=task_id, actor=ACTOR, reason="the test is done")
    for task_id, _ in others:
        cancelled(task_id, timeout=10)
    assert held_slots() == []


def test_a_dense_worker_asked_to_stop_finishes_every_attempt_in_hand_and_claims_no_more(live, fleet, tmp_path):
    (leaving,) = fleet.workers(1, env=DENSE)
    tasks = _stream(tmp_path, 4, seconds=2)
    _all_blocking(tasks)
    (queued_dir := tmp_path / "queued").mkdir()

    leaving.signal(signal.SIGTERM)
    later = submit("t.stoppable", {"dir": str(queued_dir), "how": "stream", "seconds": 0}).task_id
    assert leaving.alive(), "it waits for its attempts (2 s each) before it exits"
    wait_until(lambda: not leaving.alive(), timeout=15, message="the worker to stop")

    assert leaving.popen.returncode == 0
    ids = [t for t, _ in tasks]
    # It waited for each of its four attempts to end before it exited, and took no more.
    assert Task.objects.filter(id__in=ids, status=states.COMPLETED).count() == 4
    assert Task.objects.get(id=later).status == states.QUEUED
    wait_nothing_held()


KILL_TRIALS = [pytest.param(1, id="1-trial"), pytest.param(5, id="5-trials", marks=pytest.mark.stress)]


@pytest.mark.parametrize("trials", KILL_TRIALS)
def test_kill_9_of_a_dense_worker_hands_every_attempt_to_another_after_its_lease(live, fleet, tmp_path, trials):
    fleet.supervisors(1)
    takeovers = []
    for trial in range(trials):
        (doomed,) = fleet.workers(1, env=DENSE)
        (trial_dir := tmp_path / f"trial{trial}").mkdir()
        tasks = _stream(trial_dir, PLACES, seconds=6)
        _all_blocking(tasks)
        ids = [t for t, _ in tasks]
        assert {_live(t).worker.rpartition(":")[2] for t in ids} == {str(doomed.pid)}
        (heir,) = fleet.workers(1, env=DENSE)

        doomed.kill()
        killed = time.monotonic()
        wait_until(
            lambda ids=ids: Attempt.objects.filter(task_id__in=ids, epoch=2).count() == PLACES,
            timeout=15,
            message="every attempt taken over",
        )
        takeovers.append(time.monotonic() - killed)

        wait_until(
            lambda ids=ids: Task.objects.filter(id__in=ids, status=states.COMPLETED).count() == PLACES,
            timeout=30,
            message="every task to complete on the heir",
        )
        for task_id in ids:
            first, second = Attempt.objects.filter(task_id=task_id).order_by("epoch")
            assert first.end_reason == "lease_expired" and first.worker.endswith(f":{doomed.pid}")
            assert second.worker.endswith(f":{heir.pid}") and second.end_reason == "complete"
            # `first` was journaled by the dead worker: replayed, not run again.
            assert Step.objects.filter(task_id=task_id, name="first").get().epoch == 1
        heir.kill()  # idle now: the next trial's tasks must all go to its own doomed worker
        wait_nothing_held()
    print(f"\nkill -9 of a worker holding {PLACES} attempts: all taken over in {[round(t, 2) for t in takeovers]} s")
    assert max(takeovers) <= LEASE + SWEEP + 1.0


def test_a_cpu_bound_attempt_delays_neither_the_renewals_nor_a_stop_of_the_others(live, fleet, tmp_path):
    """One attempt computes without pause (the GIL switches threads every 5 ms): the
    others' leases are still renewed each heartbeat, and a stop of one still ends it
    within its bound."""
    fleet.workers(1, env=DENSE)
    (spin_dir := tmp_path / "spin").mkdir()
    spinner = submit("t.stoppable", {"dir": str(spin_dir), "how": "spin", "seconds": 60}).task_id
    tasks = _stream(tmp_path, PLACES - 1, seconds=60)
    _all_blocking([*tasks, (spinner, spin_dir)])
    ids = [t for t, _ in tasks]

    before = {t: _live(t).lease_expires_at for t in ids}
    wait_until(lambda: all(_live(t).lease_expires_at > before[t] for t in ids), timeout=2, message="renewals")
    (stopped, _) = tasks[0]
    task_stop(task_id=stopped, actor=ACTOR, reason="stop one beside a spinning attempt")
    task = cancelled(stopped, timeout=5)
    ack = acks(stopped)[states.WORKER]
    to_ack = since_stop(task, ack.at)
    print(f"\nbeside a CPU-bound attempt: stop -> worker ack {to_ack * 1000:.0f} ms")
    assert ack.detail["ended"] == "cleanly" and to_ack < 1.0
    for task_id in [*ids[1:], spinner]:
        task_stop(task_id=task_id, actor=ACTOR, reason="the test is done")
    for task_id in [*ids[1:], spinner]:
        cancelled(task_id, timeout=10)


LIMIT_TRIALS = [pytest.param(6, id="6-trials"), pytest.param(40, id="40-trials", marks=pytest.mark.stress)]


@pytest.mark.parametrize("trials", LIMIT_TRIALS)
def test_a_pool_limit_holds_exactly_across_dense_workers(live, fleet, fake, trials):
    """Two dense workers with 8 places each, 12 tasks submitted at once by racing
    threads into a pool of 3, over many trials: never more than 3 run at once."""
    fleet.workers(2, env=DENSE)
    peaks = Counter()
    for trial in range(trials):
        pool = f"dense-{trial}"
        pool_with(pool, max_running=3, max_queued=50)
        fake.reset()
        with Sampler(pool, fake, pressure=True) as sampler:
            results = race(12, lambda i, pool=pool: submit_to(pool, fake.url).task_id)
            ids = [r for r in results if not isinstance(r, Exception)]
            assert len(ids) == 12, results
            wait_until(
                lambda ids=ids: Task.objects.filter(id__in=ids, status=states.COMPLETED).count() == 12,
                timeout=60,
                message=f"trial {trial}: all 12 tasks to complete",
            )
        assert sampler.peak(0) <= 3 and sampler.peak(1) <= 3 and sampler.peak(2) <= 3
        peaks[fake.peak_active] += 1
        assert fake.peak_active <= 3
    print(f"\npeak requests at once per trial (limit 3): {dict(peaks)}")
    assert peaks[3] >= 1, "the trials must have filled the pool"


def submit_to(pool: str, url: str):
    from runtime.tasks.services import task_submit

    return task_submit(
        agent="t.busy", input={"url": url, "delay": 0.2}, pool=pool, tenant="acme", owner=ACTOR, actor=ACTOR
    )
