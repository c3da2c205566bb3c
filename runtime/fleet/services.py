"""The fleet: which worker and supervisor processes are alive, and what they did.

Each process beats (runtime/worker/heartbeat.py): one upsert of its row with its totals
(runtime/meter.py), and what it did since the last beat added to the current minute's
row. Nothing here decides what runs: a worker's attempts are judged by their leases, and
a process row is only what an operator reads (the dashboard, health, /metrics).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from datetime import timedelta

from django.db.models.functions import Now

from runtime import db
from runtime.meter import WAIT_BOUNDS, Counted
from runtime.models import Process

# The minute row of what a process counted with no tenant named (none does today: each
# count of a task's work names its tenant); the fleet's minute sums it with the rest.
NO_TENANT = ""

# Rows of processes gone this long, and minute rows this old, are pruned by the sweep.
KEEP_PROCESSES = timedelta(days=7)
KEEP_MINUTES = timedelta(hours=24)


def process_name(kind: str) -> str:
    return f"{kind}:{socket.gethostname()}:{os.getpid()}"


def process_beat(
    *,
    kind: str,
    totals: dict,
    fresh: dict,
    waits: list[int],
    tenants: dict[str, Counted] | None = None,
    queue: str = "",
    swept: bool = False,
) -> None:
    """Record that this process is alive and what it did (one statement, autocommit):
    a minute row per tenant whose tasks it ran (`tenants`), and whatever was counted for
    no tenant under NO_TENANT, so the fleet's minute (their sum) misses nothing."""
    rows = {tenant: minute for tenant, minute in (tenants or {}).items()}
    rest = Counted(
        finished=fresh.get("completed", 0) + fresh.get("failed", 0),
        failed=fresh.get("failed", 0),
        steps=fresh.get("steps", 0),
        waits=list(waits) or [0] * len(WAIT_BOUNDS),
    )
    for minute in rows.values():
        rest.finished -= minute.finished
        rest.failed -= minute.failed
        rest.steps -= minute.steps
        rest.waits = [a - b for a, b in zip(rest.waits, minute.waits, strict=True)]
    # Counted under the same lock as the totals (runtime/meter.py), so never negative.
    rows.setdefault(NO_TENANT, Counted()).add(rest)
    minutes = [
        {"tenant": tenant, "finished": m.finished, "failed": m.failed, "steps": m.steps, "waits": m.waits}
        for tenant, m in sorted(rows.items())
        if m.finished or m.failed or m.steps or any(m.waits)
    ]
    db.execute(
        "process_beat",
        {
            "name": process_name(kind),
            "kind": kind,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queue": queue,
            "counters": json.dumps(totals),
            "swept": swept,
            "minutes": json.dumps(minutes),
        },
    )


def process_stopped(*, kind: str) -> None:
    """A warm shutdown: say so, rather than let the row age out."""
    Process.objects.filter(name=process_name(kind)).update(stopped_at=Now())


@db.reads("fleet_prune")
@dataclass(frozen=True, slots=True)
class _Pruned:
    deleted: int  # processes and minutes forgotten


def fleet_prune() -> int:
    """Forget processes gone for a week and minutes older than a day (runtime/sql/fleet_prune.sql)."""
    return db.fetchone("fleet_prune", {"processes": KEEP_PROCESSES, "minutes": KEEP_MINUTES}, row=_Pruned).deleted
