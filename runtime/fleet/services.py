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

from runtime import agents, db
from runtime.meter import WAIT_BOUNDS, Counted
from runtime.models import Process

# The tenant of a process's minute row for the whole fleet: what it did for every
# tenant, summed as it counted (rows written before minutes were kept per tenant are
# these too). The fleet's last hour reads these rows only, however many tenants there are.
FLEET = ""

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
    this minute's row of the whole fleet (tenant FLEET, what it did for everyone), and a
    row per tenant whose tasks it ran (`tenants`, from the meter)."""
    fleet = Counted(
        finished=fresh.get("completed", 0) + fresh.get("failed", 0),
        failed=fresh.get("failed", 0),
        steps=fresh.get("steps", 0),
        waits=list(waits) or [0] * len(WAIT_BOUNDS),
    )
    minutes = [
        {"tenant": tenant, "finished": m.finished, "failed": m.failed, "steps": m.steps, "waits": m.waits}
        for tenant, m in [(FLEET, fleet), *sorted((tenants or {}).items())]
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
            # The versions it serves (a worker's claim filters on them): what operators read,
            # and what tells a queued task it waits for a version nobody serves.
            "versions": json.dumps(served_versions() if kind == "worker" else {}),
        },
    )


def served_versions() -> dict[str, list[str]]:
    """{"agent": ["version", ...]}: the agent versions this process serves."""
    out: dict[str, list[str]] = {}
    names, versions, _ = agents.served()
    for name, version in zip(names, versions, strict=True):
        out.setdefault(name, []).append(version)
    return out


def process_stopped(*, kind: str) -> None:
    """A warm shutdown: say so, rather than let the row age out."""
    Process.objects.filter(name=process_name(kind)).update(stopped_at=Now())


@db.reads("fleet_prune")
@dataclass(frozen=True, slots=True)
class _Pruned:
    deleted: int  # processes and minutes forgotten


def fleet_prune() -> int:
    """Forget processes gone for a week and minutes older than a day (runtime/sql/fleet_prune.sql)."""
    return db.fetchrow("fleet_prune", {"processes": KEEP_PROCESSES, "minutes": KEEP_MINUTES}, row=_Pruned).deleted
