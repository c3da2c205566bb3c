"""A wake-up lost by the broker (a Redis restart, a worker killed holding a prefetched
message) costs latency, not work: the supervisor sees queued work that nobody picked
up and sends a new wake-up."""

import json

import pytest
import redis
from django.conf import settings

from runtime import config, states
from runtime.models import Task
from runtime.tasks.services import task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


def test_queued_work_whose_wake_up_was_lost_still_runs(live, fleet):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    sub = task_submit(agent="t.steps", input={"n": 2}, tenant="acme", owner="user:alice", actor="user:alice")
    assert broker.llen(config.queue_name()) >= 1
    broker.delete(config.queue_name())  # the broker forgets every wake-up

    (worker,) = fleet.workers(1)
    (supervisor,) = fleet.supervisors(1)
    task = wait_until(
        lambda: Task.objects.filter(id=sub.task_id, status=states.COMPLETED).first(),
        timeout=30,
        message="the supervisor to re-send the lost wake-up",
    )

    assert task.output["pid"] == worker.pid
    reports = [json.loads(line) for line in supervisor.output().splitlines() if line.startswith("{")]
    assert any(report["redispatched"] >= 1 for report in reports)
