"""Riding out outages of the database and the broker: log each outage once, back off
between retries.

A worker, the lease keeper and a supervisor each retry on their own schedule while the
database is away; without this, a PostgreSQL restart would print one traceback per
retry per thread. An Outage logs when it begins and when it ends (with how long it
lasted), and nothing in between.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)


class Outage:
    def __init__(self, what: str):
        self.what = what
        self._since: float | None = None
        self._lock = threading.Lock()

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException) -> None:
        """Something that needs `what` failed. Logs only the first failure of an outage."""
        with self._lock:
            if self._since is not None:
                return
            self._since = time.monotonic()
        log.warning(
            "%s unavailable (%s: %s); retrying with backoff",
            self.what,
            type(exc).__name__,
            str(exc).strip().splitlines()[0] if str(exc).strip() else "",
        )

    def recovered(self) -> None:
        """Something that needs `what` worked. Logs the end of an outage, if one was on."""
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            log.warning("%s back after %.1fs", self.what, time.monotonic() - since)


database = Outage("database")
broker = Outage("broker")


# A generator of its own: retry loops run in background threads (the lease keeper, the
# stop watcher), and drawing from the `random` module's shared state there would move
# the sequence of whatever else in the process uses it.
_JITTER = random.Random()


def backoff(*, base: float = 0.05, cap: float = 5.0) -> Iterator[float]:
    """Delays for successive retries: exponential from `base` up to `cap`, with ±25%
    jitter so that processes retrying after the same outage do not move in step."""
    delay = base
    while True:
        yield delay * _JITTER.uniform(0.75, 1.25)
        delay = min(cap, delay * 2)
