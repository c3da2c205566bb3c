"""Durable timers: ctx.sleep() and ctx.sleep_until() (runtime/worker/context.py).

A sleep journals its wake time and ends the attempt in one transaction, so the task
holds no worker and no slot until the supervisor finds the timer due
(runtime/sql/wake_due.sql). Wake times and the "is it due" test read the database's
clock, the one every stored time comes from.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.db import transaction

from runtime import db, states
from runtime.attempts import journal
from runtime.attempts.journal import JournalCall, Recorded, replay_or_run
from runtime.attempts.lease import Lease
from runtime.attempts.transitions import end_attempt
from runtime.errors import Suspend


def sleep(lease: Lease, call: JournalCall, *, seconds: float | None = None, until: datetime | None = None) -> None:
    """Sleep for `seconds`, or until `until`; return once the time has come.

    1. Replaying a journaled sleep: return if its wake time has passed; if the task was
       woken early (an operator resumed it), sleep the rest.
    2. Otherwise, in one transaction: read the clock, journal the wake time, and end the
       attempt `sleeping` unless the time has already come. Raises Suspend when the
       attempt ended.
    """

    def replay(recorded: Recorded) -> None:
        wake_at = recorded.output["wake_at"]
        if _clock(0).now >= wake_at:
            return
        end_attempt(lease, states.TaskEvent.SLEEP, wake_at=_utc(wake_at), note=_until(wake_at))
        raise Suspend("sleep")

    def run(call: JournalCall) -> None:
        with transaction.atomic(durable=True):
            clock = _clock(seconds or 0)
            now, wake_at = clock.now, until.timestamp() if until is not None else clock.later
            journal.write(lease, seq=call.seq, name=call.name, kind=call.kind, output=json.dumps({"wake_at": wake_at}))
            if wake_at <= now:
                return
            end_attempt(lease, states.TaskEvent.SLEEP, wake_at=_utc(wake_at), note=_until(wake_at))
        raise Suspend("sleep")

    replay_or_run(call, replay=replay, run=run)


def _clock(seconds: float) -> db.Clock:
    clock = db.fetchone("clock", {"seconds": seconds}, row=db.Clock)
    assert clock is not None  # the statement always answers one row
    return clock


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def _until(timestamp: float) -> str:
    return f"sleeping until {_utc(timestamp).isoformat(timespec='seconds')}"
