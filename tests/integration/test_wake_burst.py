"""A wake-up burst: many tasks asleep on one shared wake time all wake in the same
sweep, in a pool whose running limit is far below their number. The limit must hold
across worker processes while they drain (sampled from PostgreSQL on a thread, and
counted by the fake service), every task must complete, and no sleeping task may hold a
slot meanwhile. There are more workers than slots, so the limit, not the fleet's size,
is what caps the concurrency.

The default run wakes 200 tasks; the 1,000-task burst is under `stress` (make stress):
on 2 shared cores it took 77 s (docs/performance.md, the wake burst).
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from runtime import db, states
from runtime.limits.services import pool_create
from runtime.models import Attempt, Slot, Task
from runtime.tasks.services import task_submit
from tests.concurrency import Sampler, usage
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
LIMIT = 8
WORKERS = 10


def statuses(ids) -> Counter:
    return Counter(Task.objects.filter(id__in=ids).values_list("status", flat=True))


@pytest.mark.parametrize(
    "n", [pytest.param(200, id="200-tasks"), pytest.param(1000, id="1000-tasks", marks=pytest.mark.stress)]
)
def test_a_burst_of_tasks_woken_at_once_never_runs_more_than_the_pools_limit(live, fleet, fake, n):
    pool_create(actor="user:alice", name="burst", max_running=LIMIT, max_queued=n)
    fleet.workers(WORKERS)
    fleet.supervisors(1)
    # One wake time for all, far enough ahead for every task to have fallen asleep first
    # (about 2 ms a task to submit and as much to put to sleep, on a loaded machine).
    now, until = db.fetchone("clock", {"seconds": 5 + n * 0.025})
    began = time.monotonic()
    ids = [
        task_submit(
            agent="t.wake_burst", input={"until": until, "url": fake.url, "delay": 0.01}, pool="burst", **ALICE
        ).task_id
        for _ in range(n)
    ]
    wait_until(
        lambda: statuses(ids) == Counter({states.SLEEPING: n}),
        timeout=until - now,
        interval=0.1,
        message=f"all {n} tasks to fall asleep",
    )
    asleep_at, _ = db.fetchone("clock", {"seconds": 0})
    assert asleep_at < until, "every task must be asleep before the shared wake time"
    # n tasks asleep in an 8-slot pool: none of them holds a slot, a worker or a lease.
    assert usage("burst") == (0, 0, 0, n, 0)
    assert not fake.calls()

    with Sampler("burst", fake) as sampler:
        wait_until(
            lambda: statuses(ids) == Counter({states.COMPLETED: n}),
            timeout=120 + n * 0.2,
            interval=0.1,
            message=f"all {n} tasks to wake and complete",
        )
    print(
        f"wake burst of {n}: asleep after {asleep_at - now:.1f}s, drained {time.monotonic() - began:.1f}s "
        f"after the first submit; {len(sampler.samples)} samples, peaks: slots {sampler.peak(0)}, "
        f"running {sampler.peak(1)}, attempts {sampler.peak(2)}, calls in flight {fake.peak_active}"
    )

    assert len(sampler.samples) > 50, "the sampler must have watched the drain"
    # PostgreSQL's view and the outside world's: never more than the limit at once ...
    assert sampler.peak(0) <= LIMIT and sampler.peak(1) <= LIMIT and sampler.peak(2) <= LIMIT
    assert fake.peak_active <= LIMIT
    # ... and more than one at once: the burst was run by several workers together.
    assert fake.peak_active >= 2
    assert len({c["worker"] for c in fake.calls()}) >= 2
    # No slot was ever held by a task that was not running (asleep, in particular).
    assert sampler.peak(4) == 0
    assert len(fake.calls()) == n and Slot.objects.filter(pool="burst", task__isnull=False).count() == 0
    # Each slept once and woke once, and none woke before the shared time.
    ends = Counter(
        tuple(Attempt.objects.filter(task_id=i).order_by("epoch").values_list("reason", "end_reason")) for i in ids
    )
    assert ends == Counter({(("first", "sleep"), ("resume", "complete")): n})
    first_woken = Attempt.objects.filter(task_id__in=ids, epoch=2).order_by("started_at").first()
    assert first_woken.started_at.timestamp() >= until
