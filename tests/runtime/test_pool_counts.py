"""Admission reads kept counts (steward_pool_count) instead of counting a pool's tasks:
triggers on steward_task keep, per pool, how many tasks are queued or running. The
counts must equal a recount after every kind of transition, the bound must hold under
racing submits on many connections, and the supervisor's fold must change no sum.

(Every test that uses the `live` fixture also checks the counts against a recount when
it ends: tests/conftest.py. The integration and fault tests therefore check them after
real worker processes were killed, frozen and recovered.)
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from runtime import states
from runtime.attempts.lease import claim_next
from runtime.effects.services import effect_resolve
from runtime.errors import QueueFull
from runtime.limits.selectors import pool_usage
from runtime.limits.services import default_pool_name
from runtime.models import Attempt, Effect, PoolCount, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import Submission, task_resume, task_submit
from runtime.worker.executor import run_attempt
from runtime.worker.supervisor import sweep
from tests.conftest import database_url
from tests.counts import count_drift, kept_counts
from tests.harness import race, wait_until
from tests.pools import pool_with
from tests.runtime.inprocess import NAP, recover, run, submit, wake

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
RACE_TRIALS = 20


def kept() -> int:
    """The default pool's kept count, after checking every pool against a recount."""
    assert count_drift() == {}
    return kept_counts().get(default_pool_name(), 0)


def status(task_id) -> str:
    return Task.objects.values_list("status", flat=True).get(id=task_id)


def counter_versions() -> set:
    """The row versions of the counter table (xmin changes with every write to a row)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pool, shard, xmin::text FROM steward_pool_count")
        return set(cur.fetchall())


def test_the_kept_count_follows_a_task_through_sleep_wake_completion_failure_cancel_and_resume(live):
    sleeper = submit("t.sleeper", {"seconds": NAP})
    failing = submit("t.child", {"value": 1, "fail": True})
    assert kept() == 2

    run()  # the sleeper sleeps (leaves the set), the other fails (leaves it)
    assert (status(sleeper), status(failing)) == (states.SLEEPING, states.FAILED)
    assert kept() == 0

    wake()
    assert status(sleeper) == states.QUEUED and kept() == 1
    run()
    assert status(sleeper) == states.COMPLETED and kept() == 0

    task_resume(task_id=failing, actor="user:alice")
    assert kept() == 1
    task_stop(task_id=failing, actor="user:alice", reason="test")
    assert kept() == 0


def test_the_kept_count_follows_children_a_waiting_parent_and_its_wake_up(live):
    parent = submit("t.parent", {"values": [1, 2]})
    assert kept() == 1

    run_attempt(
        claim_next(pool=default_pool_name(), worker="test")
    )  # one attempt, not a drain  # spawns two children, then waits: the parent leaves the set
    assert status(parent) == states.WAITING
    assert kept() == 2

    run()  # the children complete; the last one wakes the parent; the parent completes
    assert status(parent) == states.COMPLETED
    assert kept() == 0


def test_the_kept_count_follows_a_block_and_its_resolution(live, fake):
    fake.push("drop")
    task_id = submit("t.effect", {"url": fake.url, "effect_class": "irreversible", "keyed": True})
    run()
    assert status(task_id) == states.BLOCKED
    assert kept() == 0

    effect_resolve(effect_id=Effect.objects.get(task_id=task_id).id, outcome="committed", actor="user:alice")
    assert status(task_id) == states.QUEUED and kept() == 1
    run()
    assert status(task_id) == states.COMPLETED and kept() == 0


def test_claims_and_recoveries_do_not_write_the_counter_and_a_dead_letter_does(live, settings):
    settings.STEWARD = {**settings.STEWARD, "MAX_CRASHES": 2}
    task_id = submit("t.steps", {"n": 1})
    before = counter_versions()

    assert claim_next(pool=default_pool_name(), worker="test") is not None  # queued -> running
    recover(task_id)  # running -> queued
    assert status(task_id) == states.QUEUED
    # Neither left {queued, running}: the WHEN clauses kept the trigger from even running.
    assert counter_versions() == before
    assert kept() == 1

    assert claim_next(pool=default_pool_name(), worker="test") is not None
    recover_to_dead(task_id)
    assert status(task_id) == states.DEAD
    assert kept() == 0


def recover_to_dead(task_id) -> None:
    def dead():
        Attempt.objects.filter(task_id=task_id, ended_at__isnull=True).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        sweep(supervisor_id="test")
        return status(task_id) == states.DEAD

    wait_until(dead, message="the second expiry to dead-letter the task")


def test_pools_reports_running_and_queued_from_the_kept_counts_and_held_slots(live):
    pool_with("batch", max_running=2, max_queued=5)
    for _ in range(3):
        task_submit(agent="t.steps", input={}, pool="batch", **ALICE)
    claim_next(pool="batch", worker="test")

    (usage,) = [u for u in pool_usage() if u.pool.name == "batch"]
    assert (usage.running, usage.queued, usage.slots_held) == (1, 2, 1)
    assert (usage.pool.max_running, usage.pool.max_queued) == (2, 5)


# --- races ---------------------------------------------------------------------------------


def test_racing_submits_on_many_connections_never_admit_past_the_limit(live):
    """Each racing thread is its own backend, so each writes its own counter row: the
    bound holds only if every submit sums the rows the others committed while it
    waited for the pool's lock."""
    outcomes = Counter()
    for trial in range(RACE_TRIALS):
        pool = f"tight-{trial}"
        pool_with(pool, max_running=1, max_queued=2)

        results = race(8, lambda i: task_submit(agent="t.steps", input={"i": i}, pool=pool, **ALICE))

        outcomes.update(type(r).__name__ for r in results)
        assert sum(isinstance(r, Submission) for r in results) == 3, results
        assert all(isinstance(r, (Submission, QueueFull)) for r in results), results
        assert kept_counts()[pool] == Task.objects.filter(pool=pool).count() == 3
    assert outcomes == Counter(Submission=3 * RACE_TRIALS, QueueFull=5 * RACE_TRIALS)
    assert count_drift() == {}


def test_racing_submits_and_cancels_keep_the_bound_and_the_count(live):
    """Cancels free admission on other connections while submits race for it. Whatever
    the interleaving, the pool never holds more than its limit, the counter agrees with
    a recount, and a submit that starts after the cancels committed is admitted."""
    admitted_total = 0
    for trial in range(RACE_TRIALS):
        pool = f"churn-{trial}"
        pool_with(pool, max_running=1, max_queued=3)
        victims = [task_submit(agent="t.steps", input={"v": i}, pool=pool, **ALICE).task_id for i in range(4)]

        stops_left = [4]
        lock = threading.Lock()

        def act(i):
            if i < 4:
                try:
                    return task_stop(task_id=victims[i], actor="user:alice", reason="test")
                finally:
                    with lock:
                        stops_left[0] -= 1
            # A stop is a longer transaction than a submit: a submit turned away while
            # stops are still committing tries again, so some submit meets freed room.
            while True:
                try:
                    return task_submit(agent="t.steps", input={"i": i}, pool=pool, **ALICE)
                except QueueFull:
                    with lock:
                        if not stops_left[0]:
                            raise

        results = race(12, act)

        assert not [r for r in results if isinstance(r, Exception) and not isinstance(r, QueueFull)], results
        admitted = sum(isinstance(r, Submission) for r in results)
        admitted_total += admitted
        live_now = Task.objects.filter(pool=pool, status__in=[states.QUEUED, states.RUNNING]).count()
        assert live_now == admitted <= 4
        assert kept_counts()[pool] == live_now
        # Every cancel has committed now: the next four submits fit, the fifth does not.
        for _ in range(4 - admitted):
            task_submit(agent="t.steps", input={}, pool=pool, **ALICE)
        with pytest.raises(QueueFull):
            task_submit(agent="t.steps", input={}, pool=pool, **ALICE)
    assert admitted_total > 0, "no submit ever saw a cancel's freed room: the race never raced"
    assert count_drift() == {}


# --- the fold ------------------------------------------------------------------------------


def test_the_sweep_folds_the_rows_of_departed_backends_and_changes_no_sum(live):
    pool_with("folded", max_running=1, max_queued=50)
    task_submit(agent="t.steps", input={}, pool="folded", **ALICE)  # this test's own backend
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        (mine,) = cur.fetchone()
    departed = []
    for i in range(5):  # five more backends, each gone once it has submitted
        with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as other:
            (outcome,) = other.execute(
                "SELECT outcome FROM steward_submit(gen_random_uuid(), 't.steps', '{}', %s, 'acme', 'user:alice',"
                " 'folded', NULL, 'user:alice', '{}', NULL, NULL, NULL, '')",
                (f"digest-{i}",),
            ).fetchone()
            assert outcome == "created"
            departed.append(other.info.backend_pid)

    def gone():  # a backend exits a moment after its client hangs up
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [departed])
            return cur.fetchone()[0] == 0

    wait_until(gone, message="the departed backends to exit")

    def shards() -> dict:
        return dict(PoolCount.objects.filter(pool="folded").values_list("shard", "admitted"))

    assert len(shards()) == 6 and sum(shards().values()) == 6

    sweep(supervisor_id="test")

    # The departed backends' rows became shard 0; this connection's row is still in use.
    assert shards() == {0: 5, mine: 1}
    assert count_drift() == {}
