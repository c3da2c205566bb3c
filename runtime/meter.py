"""What this process did since it started: steps journaled, effects committed, claims and
how long each task waited in the queue, tasks finished, sweeps. Counted in memory where
it happens (the executor, the journal, the ledger, the sweep) at the cost of an integer
increment, and written to PostgreSQL by the process's heartbeat (runtime/worker/heartbeat.py)
for the dashboard, health and /metrics to read (runtime/fleet/).

One writer thread per process counts; the heartbeat thread takes what accumulated since
its last beat under a lock, so nothing counted is lost or counted twice.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter

# Bucket upper bounds, in seconds, of the queue-wait histogram (the last is +inf).
WAIT_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, float("inf"))


class Meter:
    def __init__(self):
        self._lock = threading.Lock()
        self._total: Counter = Counter()
        self._fresh: Counter = Counter()
        self._waits = [0] * len(WAIT_BOUNDS)  # since the last take
        self._waits_total = [0] * len(WAIT_BOUNDS)  # since the process started
        self._wait_sum = 0.0

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._total[name] += n
            self._fresh[name] += n

    def waited(self, seconds: float) -> None:
        """A task was claimed `seconds` after it was queued."""
        bucket = bisect.bisect_left(WAIT_BOUNDS, seconds)
        with self._lock:
            self._waits[bucket] += 1
            self._waits_total[bucket] += 1
            self._wait_sum += seconds
            self._total["claims"] += 1
            self._fresh["claims"] += 1

    def take(self) -> tuple[dict, dict, list[int]]:
        """(totals since start, counts since the last take, queue waits since the last take)."""
        with self._lock:
            totals = dict(self._total)
            totals["wait_seconds_sum"] = round(self._wait_sum, 6)
            totals["waits"] = list(self._waits_total)
            fresh, self._fresh = dict(self._fresh), Counter()
            waits, self._waits = self._waits, [0] * len(WAIT_BOUNDS)
        return totals, fresh, waits


meter = Meter()
