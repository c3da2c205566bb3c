"""Time-ordered task ids (UUID version 7, RFC 9562): 48 bits of Unix milliseconds, then
random bits. Ordered by id, tasks are ordered by creation, so the primary key alone
serves "newest first" and a created-at range is an id range (runtime/tasks/selectors.py).

steward_submit() mints them in SQL from the transaction's now(), the same clock and
instant as the task's created_at (migration 0005); `uuid7()` here is the Python twin for
rows made through the ORM.
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta

_VERSION = 0x7 << 76
_VARIANT = 0b10 << 62
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def uuid7(ms: int | None = None) -> uuid.UUID:
    ms = time.time_ns() // 1_000_000 if ms is None else ms
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a, rand_b = rand >> 68 & 0xFFF, rand & ((1 << 62) - 1)
    return uuid.UUID(int=(ms & ((1 << 48) - 1)) << 80 | _VERSION | rand_a << 64 | _VARIANT | rand_b)


def uuid7_floor(ms: int) -> uuid.UUID:
    """The smallest version-7 id minted in millisecond `ms`: every id minted at `ms` or
    later sorts at or after it. A millisecond outside the 48 bits is held to them: before
    the epoch (a filter from 1969, or year 1) is the epoch, no id being older. Masked
    instead, -1 became the largest millisecond, and `created_after=1969-12-31T23:59:59Z`
    listed no task at all."""
    return uuid.UUID(int=min(max(ms, 0), (1 << 48) - 1) << 80 | _VERSION | _VARIANT)


def epoch_ms(when: datetime) -> int:
    """Whole milliseconds since the epoch, rounded down as the minting rounds them."""
    return (when - _EPOCH) // timedelta(milliseconds=1)
