"""Telling workers that a pool may have work. Celery is transport only: a message
names a pool, and the worker that receives it claims whatever PostgreSQL says is the
oldest queued task there (runtime/sql/claim.sql). A lost message costs latency, not
work: the supervisor re-sends for any pool whose queued tasks have waited too long. A
duplicate costs one claim query that finds nothing.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction

from runtime import config

log = logging.getLogger(__name__)

RUN_POOL = "runtime.run_pool"


def pool_has_work(pool: str, count: int = 1) -> None:
    """Send `count` wake-ups for `pool` once the current transaction commits (at once
    if there is none): a worker must never receive a message for a row it cannot see."""
    if count > 0:
        transaction.on_commit(lambda: send(pool, count))


def send(pool: str, count: int = 1) -> None:
    try:
        for _ in range(count):
            current_app.send_task(RUN_POOL, args=[pool], queue=config.queue_name())
    except Exception:  # noqa: BLE001 - the broker being down must not undo a commit
        log.exception("could not send %d wake-up(s) for pool %s; the supervisor will re-send", count, pool)
