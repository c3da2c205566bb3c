"""Reads of the fleet for the dashboard, health and /metrics (runtime/fleet/services.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import Now

from runtime import config, db, states
from runtime.attempts import dispatch
from runtime.fleet.services import FLEET
from runtime.limits.selectors import MAX_POOLS, pool_usage
from runtime.meter import WAIT_BOUNDS
from runtime.models import Attempt, Effect, Process, Task


@dataclass
class LiveProcess:
    process: Process
    alive: bool
    attempts: list[Attempt] = field(default_factory=list)  # the live attempts it holds (workers)


def fleet(*, kind: str | None = None) -> list[LiveProcess]:
    """Every process seen within a lease (alive) or stopped within a day, newest first;
    each worker with the live attempts it holds and their lease expiry."""
    lease = timedelta(seconds=config.lease_seconds())
    rows = Process.objects.filter(Q(seen_at__gte=Now() - timedelta(days=1)))
    if kind:
        rows = rows.filter(kind=kind)
    rows = list(rows.order_by("kind", "-seen_at")[:200])
    now = db.clock()
    live = [LiveProcess(p, p.stopped_at is None and now - p.seen_at <= lease) for p in rows]
    by_worker = {p.process.name.split(":", 1)[1]: p for p in live if p.process.kind == "worker"}
    for attempt in Attempt.objects.filter(ended_at__isnull=True, worker__in=list(by_worker)).order_by("started_at"):
        by_worker[attempt.worker].attempts.append(attempt)
    return live


@dataclass(frozen=True)
class Minute:
    minute: datetime
    finished: int
    failed: int
    steps: int
    waits: list[int]

    def wait_quantile(self, q: float) -> float | None:
        """The bucket bound below which a fraction `q` of this minute's claims waited."""
        total = sum(self.waits)
        if not total:
            return None
        seen = 0
        for bound, count in zip(WAIT_BOUNDS, self.waits, strict=True):
            seen += count
            if seen >= q * total:
                return bound
        return WAIT_BOUNDS[-1]


@db.reads("fleet_minutes")
@dataclass(frozen=True, slots=True)
class _Summed:
    minute: datetime
    finished: int
    failed: int
    steps: int
    waits: list[int] | None  # None: no process reported in that minute


def throughput(*, minutes: int = 60, tenant: str | None = None) -> list[Minute]:
    """The last `minutes` minutes, one per minute (empty minutes included): of `tenant`'s
    tasks, or with no tenant the whole fleet's (every tenant's, summed)."""
    rows = db.fetchall(
        "fleet_minutes", {"minutes": minutes, "tenant": FLEET if tenant is None else tenant}, row=_Summed
    )
    return [Minute(m.minute, m.finished, m.failed, m.steps, list(m.waits or [0] * len(WAIT_BOUNDS))) for m in rows]


@dataclass(frozen=True)
class Health:
    database_ms: float | None
    broker_ms: float | None
    last_sweep_at: datetime | None
    sweep_age_seconds: float | None
    live_workers: int
    live_supervisors: int
    # Which process made that sweep: a `steward supervise` process ("supervisor:..."), or
    # a worker that ran the sweep Celery beat sent it ("worker:...", as `make run` does).
    last_sweep_by: str | None = None

    @property
    def ok(self) -> bool:
        sweeping = self.sweep_age_seconds is not None and self.sweep_age_seconds <= max(
            5 * config.sweep_seconds(), config.lease_seconds()
        )
        return self.database_ms is not None and self.broker_ms is not None and sweeping and self.live_workers > 0


def health() -> Health:
    """Is each part answering: the database, the broker, a supervisor sweeping lately,
    some live worker. Each is timed; a part that does not answer is None."""
    started = time.perf_counter()
    try:
        now = db.clock()
        database_ms = (time.perf_counter() - started) * 1000
    except db.CONNECTION_ERRORS:
        return Health(None, _broker_ms(), None, None, 0, 0)
    processes = fleet()
    sweeper = max(
        (p.process for p in processes if p.process.last_sweep_at), key=lambda p: p.last_sweep_at, default=None
    )
    swept = sweeper.last_sweep_at if sweeper else None
    return Health(
        database_ms=round(database_ms, 2),
        broker_ms=_broker_ms(),
        last_sweep_at=swept,
        sweep_age_seconds=(now - swept).total_seconds() if swept else None,
        live_workers=sum(1 for p in processes if p.alive and p.process.kind == "worker"),
        live_supervisors=sum(1 for p in processes if p.alive and p.process.kind == "supervisor"),
        last_sweep_by=sweeper.name if sweeper else None,
    )


def _broker_ms() -> float | None:
    started = time.perf_counter()
    return round((time.perf_counter() - started) * 1000, 2) if dispatch.broker_ping() else None


@db.reads("dashboard_version")
@dataclass(frozen=True, slots=True)
class _DashboardVersion:
    version: str


def dashboard_version(*, tenant: str, fleet_totals: bool, soon_seconds: int) -> str:
    """A digest of what the dashboard shows `tenant` (with the whole fleet's totals when
    `fleet_totals`), read in one prepared statement: runtime/sql/dashboard_version.sql
    says what it covers. It moves at least once a minute, so what only time changes
    (the last hour's window, "ago" texts, the database's answer time) is refreshed
    within a minute; a change to what the dashboard counts moves it at once. Whether the
    broker answers is part of it too (a ping, not a statement): health says so."""
    found = db.fetchone(
        "dashboard_version",
        {
            "tenant": tenant,
            "live": sorted(states.LIVE),
            "fleet": fleet_totals,
            "lease": config.lease_seconds(),
            "sweep_ok": max(5 * config.sweep_seconds(), config.lease_seconds()),
            "soon": soon_seconds,
        },
        row=_DashboardVersion,
    )
    assert found is not None  # a SELECT of expressions, with no FROM: always one row
    return f"{found.version}.{int(dispatch.broker_ping())}"


# --- what /metrics exports (console/metrics.py), read at scrape time --------------------------


@dataclass(frozen=True)
class MetricsSnapshot:
    live_tasks: list[tuple[str, str, int]]  # (tenant, status, count) for each live status
    unknown_effects: list[tuple[str, int]]  # (tenant, count) of effects waiting for a person
    processes: list[LiveProcess]  # each with its own cumulative counters
    pools: list  # limits.selectors.PoolUsage


def metrics_snapshot() -> MetricsSnapshot:
    """Everything /metrics reports, from PostgreSQL, so every web process answers the
    same. Each count reads an index whose size follows live work, not history: live
    tasks by status (task_status_id), unknown effects (effect_state_id); finished work
    is the processes' own counters (runtime/meter.py), never a count of the task table."""
    live = (
        Task.objects.filter(status__in=sorted(states.LIVE))
        .values_list("tenant", "status")
        .annotate(n=Count("id"))
        .order_by("tenant", "status")
    )
    unknown = (
        Effect.objects.filter(state=states.UNKNOWN).values_list("tenant").annotate(n=Count("id")).order_by("tenant")
    )
    return MetricsSnapshot(
        live_tasks=list(live),
        unknown_effects=list(unknown),
        processes=fleet(),
        pools=list(pool_usage(limit=MAX_POOLS).items),
    )
