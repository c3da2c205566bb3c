"""Telling workers that a pool may have work. Celery is transport only: a message
names a pool, and the worker that receives it claims whatever PostgreSQL says is the
oldest queued task there (runtime/sql/claim.sql). A lost message costs latency, not
work: the supervisor re-sends for any pool whose queued tasks have waited too long. A
duplicate costs one claim query that finds nothing.

Wake-ups sit on the path from submit to the first step, so with a Redis broker they
are written straight to the queue's list in Celery's message protocol (version 2, the
format `celery worker` consumes) instead of through `send_task`, which spends about
0.5 ms of CPU per message building and routing it. tests/runtime/test_dispatch.py
checks the envelope against the one Celery itself produces.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from base64 import b64encode
from functools import cache

import redis
from celery import current_app
from django.conf import settings
from django.db import transaction

from runtime import config, outages

log = logging.getLogger(__name__)

RUN_POOL = "runtime.run_pool"


def pool_has_work(pool: str, count: int = 1) -> None:
    """Send `count` wake-ups for `pool` once the current transaction commits (at once
    if there is none): a worker must never receive a message for a row it cannot see."""
    if count > 0:
        transaction.on_commit(lambda: send(pool, count))


def send(pool: str, count: int = 1) -> None:
    try:
        client = _redis()
        if client is None:
            for _ in range(count):
                current_app.send_task(RUN_POOL, args=[pool], queue=config.queue_name(), ignore_result=True)
            return
        queue = config.queue_name()
        client.lpush(queue, *[wake_up_message(pool, queue) for _ in range(count)])
    except (redis.RedisError, OSError) as exc:
        # The broker being down must not undo a commit, nor print a traceback per
        # message: the supervisor re-sends wake-ups for queued work nobody picked up.
        outages.broker.failed(exc)
    except Exception:
        log.exception("could not send %d wake-up(s) for pool %s; the supervisor will re-send", count, pool)
    else:
        outages.broker.recovered()


def broker_ping() -> bool:
    """Whether the broker answers (for health): a PING on the wake-up client, or a
    connection through Celery when the broker is not Redis."""
    try:
        client = _redis()
        if client is not None:
            return bool(client.ping())
        with current_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


def wake_up_message(pool: str, queue: str) -> str:
    """One `runtime.run_pool(pool)` task message, as kombu's Redis transport stores it."""
    task_id = str(uuid.uuid4())
    return json.dumps(
        {
            "body": _body(pool),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {
                "lang": "py",
                "task": RUN_POOL,
                "id": task_id,
                "shadow": None,
                "eta": None,
                "expires": None,
                "group": None,
                "group_index": None,
                "retries": 0,
                "timelimit": [None, None],
                "root_id": task_id,
                "parent_id": None,
                "argsrepr": "",
                "kwargsrepr": "",
                "origin": _origin(),
                "ignore_result": True,
                "replaced_task_nesting": 0,
                "stamped_headers": None,
                "stamps": {},
            },
            "properties": {
                "correlation_id": task_id,
                "reply_to": "",
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
    )


@cache
def _body(pool: str) -> str:
    # [args, kwargs, embed]: the same for every wake-up of a pool.
    embed = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
    return b64encode(json.dumps([[pool], {}, embed]).encode()).decode()


def _origin() -> str:
    return f"gen{os.getpid()}@{socket.gethostname()}"


_clients: dict[str, redis.Redis | None] = {}


def _redis() -> redis.Redis | None:
    """A client for the broker if it is Redis (None otherwise: use Celery's publisher)."""
    url = settings.CELERY_BROKER_URL
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url) if url.startswith(("redis://", "rediss://", "unix://")) else None
    return _clients[url]
