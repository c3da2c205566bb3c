"""Wake-ups are written straight to Redis in Celery's message protocol
(runtime/attempts/dispatch.py). These tests hold that envelope to the one Celery itself builds,
so a Celery upgrade that changes the protocol fails here instead of in production, and
show that a real `celery worker` runs it."""

import base64
import json

import pytest
import redis
from celery import current_app
from django.conf import settings

from runtime import states
from runtime.attempts import dispatch
from runtime.models import Task
from runtime.tasks.services import task_submit
from tests.conftest import QUEUE as SESSION_QUEUE
from tests.harness import wait_until

# This session's own: another session (or xdist worker) on the same Redis empties and reads
# a queue of its own.
QUEUE = f"{SESSION_QUEUE}-envelope-check"


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(QUEUE)
    yield client
    client.delete(QUEUE)


def shape(value):
    """The envelope's structure: keys all the way down, and every value's type."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return type(value).__name__


def test_a_wake_up_has_the_envelope_celery_builds(broker):
    current_app.send_task(dispatch.RUN_POOL, args=["research"], queue=QUEUE, ignore_result=True)
    theirs = json.loads(broker.rpop(QUEUE))
    ours = json.loads(dispatch.wake_up_message("research", QUEUE))

    # reply_to is Celery's result-queue id, origin names the process, and argsrepr /
    # kwargsrepr are for display (we leave them empty); all are strings either way.
    # Everything else must match in structure and in value.
    for envelope in (theirs, ours):
        envelope["properties"]["reply_to"] = ""
        envelope["headers"].update(origin="", argsrepr="", kwargsrepr="")
    assert shape(ours) == shape(theirs)
    for volatile in ("id", "root_id"):
        assert ours["headers"].pop(volatile) != theirs["headers"].pop(volatile)
    for volatile in ("correlation_id", "delivery_tag"):
        assert ours["properties"].pop(volatile) != theirs["properties"].pop(volatile)
    assert ours == theirs
    assert json.loads(base64.b64decode(ours["body"])) == [
        ["research"],
        {},
        {"callbacks": None, "errbacks": None, "chain": None, "chord": None},
    ]


def test_each_wake_up_is_its_own_task_message(broker, settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = QUEUE
    dispatch.send("research", count=3)
    messages = [json.loads(raw) for raw in broker.lrange(QUEUE, 0, -1)]
    assert len(messages) == 3
    assert len({m["headers"]["id"] for m in messages}) == 3
    assert all(m["properties"]["delivery_info"] == {"exchange": "", "routing_key": QUEUE} for m in messages)


@pytest.mark.integration
def test_a_real_worker_runs_the_task_a_wake_up_names(live, fleet):
    (worker,) = fleet.workers(1)
    sub = task_submit(agent="t.steps", input={"n": 2}, tenant="acme", owner="user:alice", actor="user:alice")
    task = wait_until(
        lambda: Task.objects.filter(id=sub.task_id, status=states.COMPLETED).first(),
        message="the worker to run the task its wake-up named",
    )
    assert task.output["pid"] == worker.pid
