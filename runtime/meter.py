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
from dataclasses import dataclass, field

# Bucket upper bounds, in seconds, of the queue-wait histogram (the last is +inf).
WAIT_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, float("inf"))


# The counts the dashboard charts per minute, kept per tenant as well (`Counted`), so each
# tenant's members see their own tenant's last hour and only the fleet's managers the
# fleet's (console/ui/dashboard.py): count name -> the minute's fields it adds to.
PER_MINUTE = {"completed": ("finished",), "failed": ("finished", "failed"), "steps": ("steps",)}


@dataclass
class Counted:
    """What one tenant's tasks did in this process since the last take."""

    finished: int = 0
    failed: int = 0
    steps: int = 0
    waits: list[int] = field(default_factory=lambda: [0] * len(WAIT_BOUNDS))

    def add(self, other: Counted) -> None:
        self.finished += other.finished
        self.failed += other.failed
        self.steps += other.steps
        self.waits = [a + b for a, b in zip(self.waits, other.waits, strict=True)]


class Meter:
    def __init__(self):
        self._lock = threading.Lock()
        self._total: Counter = Counter()
        self._fresh: Counter = Counter()
        self._waits = [0] * len(WAIT_BOUNDS)  # since the last take
        self._waits_total = [0] * len(WAIT_BOUNDS)  # since the process started
        self._wait_sum = 0.0
        self._tenants: dict[str, Counted] = {}  # since the last take

    def count(self, name: str, n: int = 1, *, tenant: str | None = None) -> None:
        with self._lock:
            self._total[name] += n
            self._fresh[name] += n
            if tenant is not None and name in PER_MINUTE:
                minute = self._tenants.setdefault(tenant, Counted())
                for field_name in PER_MINUTE[name]:
                    setattr(minute, field_name, getattr(minute, field_name) + n)

    def waited(self, seconds: float, *, tenant: str | None = None) -> None:
        """A task (of `tenant`) was claimed `seconds` after it was queued."""
        bucket = bisect.bisect_left(WAIT_BOUNDS, seconds)
        with self._lock:
            self._waits[bucket] += 1
            self._waits_total[bucket] += 1
            self._wait_sum += seconds
            self._total["claims"] += 1
            self._fresh["claims"] += 1
            if tenant is not None:
                self._tenants.setdefault(tenant, Counted()).waits[bucket] += 1

    def take(self) -> tuple[dict, dict, list[int], dict[str, Counted]]:
        """(totals since start, counts since the last take, queue waits since the last
        take, what each tenant's tasks did since the last take)."""
        with self._lock:
            totals = dict(self._total)
            totals["wait_seconds_sum"] = round(self._wait_sum, 6)
            totals["waits"] = list(self._waits_total)
            fresh, self._fresh = dict(self._fresh), Counter()
            waits, self._waits = self._waits, [0] * len(WAIT_BOUNDS)
            tenants, self._tenants = self._tenants, {}
        return totals, fresh, waits, tenants


meter = Meter()
