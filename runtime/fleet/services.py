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
from runtime.models import Process

# Rows of processes gone this long, and minute rows this old, are pruned by the sweep.
KEEP_PROCESSES = timedelta(days=7)
KEEP_MINUTES = timedelta(hours=24)


def process_name(kind: str) -> str:
    return f"{kind}:{socket.gethostname()}:{os.getpid()}"


def process_beat(
    *, kind: str, totals: dict, fresh: dict, waits: list[int], queue: str = "", swept: bool = False
) -> None:
    """Record that this process is alive and what it did (one statement, autocommit)."""
    active = any(fresh.get(k) for k in ("completed", "failed", "steps")) or any(waits)
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
            "active": active,
            "finished": fresh.get("completed", 0) + fresh.get("failed", 0),
            "failed": fresh.get("failed", 0),
            "steps": fresh.get("steps", 0),
            "waits": waits,
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
