"""A worker told to stop (SIGTERM, Celery's warm shutdown) finishes the attempt in hand
but claims nothing more, so a drain does not hold up a deploy; the work it leaves
queued is run by the workers that stay."""

import signal

import pytest

from runtime import states
from runtime.limits.services import pool_create
from runtime.models import Task
from runtime.tasks.services import task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


def test_a_worker_asked_to_stop_leaves_the_rest_of_the_queue_to_others(live, fleet, fake):
    pool_create(name="drain", max_running=1, max_queued=100, actor="user:alice")
    (leaving,) = fleet.workers(1)
    ids = [
        task_submit(
            agent="t.busy",
            input={"url": fake.url, "delay": 0.1},
            tenant="acme",
            owner="user:alice",
            actor="user:alice",
            pool="drain",
        ).task_id
        for _ in range(30)
    ]
    wait_until(
        lambda: Task.objects.filter(id__in=ids, status=states.COMPLETED).count() >= 2,
        message="the worker to be draining the pool",
    )

    leaving.signal(signal.SIGTERM)
    # Thirty 0.1 s tasks take about 3 s: a worker that kept draining would have emptied the
    # queue long before this bound, and the count below says so. The bound is only liveness.
    wait_until(lambda: not leaving.alive(), timeout=30, message="the worker to stop")

    left_behind = Task.objects.filter(id__in=ids).exclude(status=states.COMPLETED).count()
    assert left_behind > 0, "the worker kept draining after it was asked to stop"
    assert not Task.objects.filter(id__in=ids, status=states.RUNNING).exists()

    fleet.workers(1)
    wait_until(
        lambda: Task.objects.filter(id__in=ids, status=states.COMPLETED).count() == 30,
        timeout=30,
        message="the staying worker to run what was left",
    )
