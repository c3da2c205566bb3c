"""The supervisor sweep. Celery beat runs it every SWEEP_SECONDS on some worker, and
`manage.py steward supervise` runs it in a loop of its own (supervise(), which rides
out database outages); any number may run at once.

Each pass is a few set-based statements that claim their rows with
`FOR UPDATE SKIP LOCKED` and change them with conditional writes, so two supervisors
never act on the same row twice: one wins, the other skips it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.db import transaction
from django.utils import timezone

from runtime import config, db, outages, states
from runtime.approvals.services import approvals_expire_due
from runtime.attempts import dispatch
from runtime.lifecycle.services import retention_run
from runtime.meter import meter
from runtime.stops.services import lock_chain, stop_ack, stops_settle_due
from runtime.trail.seals import SEAL_BUDGET_SECONDS, audit_seal
from runtime.triggers.services import dependencies_settle, schedules_fire_due
from runtime.worker.heartbeat import Heartbeat


@dataclass
class SweepReport:
    recovered: int = 0  # expired leases re-queued with a new attempt to come
    dead_lettered: int = 0  # expired too often in a row: parked for an operator
    released: int = 0  # stopped attempts whose worker vanished: slot freed
    woken: int = 0  # sleeping tasks whose timer is due, and waiting parents
    redispatched: int = 0  # wake-ups re-sent for queued work nobody picked up
    sealed: int = 0  # tenants whose moved audit chain heads were sealed
    stops_bounded: int = 0  # stopping tasks cancelled because their stop's bound passed
    approvals_expired: int = 0  # tasks woken because their pending approval expired (expiry means deny)
    scheduled: int = 0  # cron ticks that submitted a task (runtime/triggers/)
    triggered: int = 0  # dependency triggers settled (fired, skipped or failed)
    retained: int = 0  # payload rows tombstoned by the daily retention job (runtime/lifecycle/)

    def as_dict(self) -> dict:
        return asdict(self)


def supervise(
    *,
    supervisor_id: str,
    interval: float | None = None,
    once: bool = False,
    on_report: Callable[[SweepReport], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Sweep every `interval` seconds (SWEEP_SECONDS by default) until `stop` is set.

    A database outage (a restart, a terminated backend, a partition) does not end the
    loop: the sweep is retried on a fresh connection with backoff, and the outage is
    logged once when it begins and once when it ends. Each sweep's statements are
    conditional writes in their own transactions, so a sweep cut short anywhere leaves
    nothing half-done; the next one picks up where it stopped.
    """
    pause = config.sweep_seconds() if interval is None else interval
    stop = stop or threading.Event()
    heartbeat, last_beat = Heartbeat("supervisor"), float("-inf")
    delays = None
    while not stop.is_set():
        try:
            report = sweep(supervisor_id=supervisor_id)
        except db.CONNECTION_ERRORS as exc:
            db.discard_connection()
            outages.database.failed(exc)
            delays = delays or outages.backoff(base=min(pause, 0.1) or 0.05, cap=max(pause, 5.0))
            stop.wait(next(delays))
            continue
        delays = None
        outages.database.recovered()
        if time.monotonic() - last_beat >= config.heartbeat_seconds():
            heartbeat.beat(swept=True)  # alive, and what it swept (runtime/fleet/)
            last_beat = time.monotonic()
        if on_report is not None:
            on_report(report)
        if once:
            return
        stop.wait(pause)


def sweep(*, supervisor_id: str) -> SweepReport:
    report = SweepReport()
    actor = f"supervisor:{supervisor_id}"
    _recover_expired(report, actor)
    _release_abandoned(report, actor)
    _retire_slots()
    _fold_counts()
    _wake(report, actor)
    _expire_approvals(report, actor)
    _settle_stops(report, actor)
    _triggers(report, actor)
    _redispatch(report)
    _seal(report)
    _retain(report)
    for name, value in report.as_dict().items():
        if value:
            meter.count(name, value)
    meter.count("sweeps")
    return report


# When this process last looked for tenants to seal: sealing is every AUDIT_SEAL_SECONDS,
# far less often than a sweep, so most sweeps skip even asking the database.
_last_seal_look = [float("-inf")]


def _seal(report: SweepReport) -> None:
    """6. Seal the audit chain heads that moved (runtime/trail/seals.py), per tenant,
    once AUDIT_SEAL_SECONDS have passed since its last seal, or at once while it is
    behind. A look costs one statement when nothing is due, and at most about
    SEAL_BUDGET_SECONDS of sealing when something is, however large the trail."""
    every = config.audit_seal_seconds()
    if time.monotonic() - _last_seal_look[0] < min(every, 5.0):
        return
    _last_seal_look[0] = time.monotonic()
    report.sealed += len(audit_seal(every=every, budget=SEAL_BUDGET_SECONDS))


# The day this process last ran the retention job (timezone.now(): the test harness's clock
# moves it). One beat sends the sweeps, so the job runs once a day; a second process that
# ran it too would find nothing left to erase (each batch takes only live rows).
_last_retention_day: list = [None]


def _retain(report: SweepReport) -> None:
    """7. Once a day, tombstone each tenant's payloads past its retention periods
    (runtime/lifecycle/retention.py): set-based UPDATEs, a bounded batch each."""
    today = timezone.now().date()
    if _last_retention_day[0] == today:
        return
    _last_retention_day[0] = today
    erased = retention_run(now=timezone.now(), actor="supervisor:retention")
    report.retained += sum(n for counts in erased.values() for n in counts.values())


@db.reads("recover_expired")
@dataclass(frozen=True, slots=True)
class _Moved:
    pool: str
    status: str  # queued (recovered) or dead (dead-lettered)


def _recover_expired(report: SweepReport, actor: str) -> None:
    """1. Running tasks whose lease expired: end the attempt, free the slot, and
    re-queue (reason `recovery`) or dead-letter after MAX_CRASHES in a row."""
    with transaction.atomic(durable=True):
        rows = db.fetchall("recover_expired", {"actor": actor, "max_crashes": config.max_crashes()}, row=_Moved)
        for moved in rows:
            if moved.status == "queued":
                report.recovered += 1
                dispatch.pool_has_work(moved.pool)
            else:
                report.dead_lettered += 1


@db.reads("abandoned_attempts")
@dataclass(frozen=True, slots=True)
class _Abandoned:
    task_id: object


@db.reads("release_abandoned")
@dataclass(frozen=True, slots=True)
class _Ended:
    pool: str | None  # the slot's pool, if the attempt held one
    task_id: object
    epoch: int
    worker: str


def _release_abandoned(report: SweepReport, actor: str) -> None:
    """2. Attempts of tasks that moved on without them (cancelled, say) whose worker
    stopped heartbeating: nobody will acknowledge, so end them and free their slots.
    One transaction per task, its rows locked first (root first, as a stop and the
    sweep's settling take them). Releasing first would append to the task's audit chain
    before the acknowledgment locked its rows: the order that deadlocked a worker's
    forced release with the sweep (docs/adr/0016-stops.md)."""
    for task_id in [row.task_id for row in db.fetchall("abandoned_attempts", {}, row=_Abandoned)]:
        with transaction.atomic(durable=True):
            lock_chain(task_id)
            for ended in db.fetchall("release_abandoned", {"actor": actor, "task": task_id}, row=_Ended):
                epoch, worker = ended.epoch, ended.worker
                report.released += 1
                if ended.pool:
                    dispatch.pool_has_work(ended.pool)
                # If a stop was waiting for this worker, it never will answer: the attempt
                # ended because its lease lapsed, and the acknowledgment says exactly that.
                stop_ack(
                    task_id=task_id,
                    boundary=states.WORKER,
                    by=actor,
                    detail={"ended": "lease lapsed", "epoch": epoch, "worker": worker},
                )


def _retire_slots() -> None:
    """2b. Slots numbered past a shrunken max_running, once their attempt has ended
    (runtime/limits/services.py pool_set_limits). claim.sql never hands them out meanwhile."""
    db.execute("retire_slots", {})


def _fold_counts() -> None:
    """2c. Fold the kept admission counts of disconnected backends into one row per
    pool (runtime/sql/pool_count_fold.sql), so admission sums a handful of rows."""
    db.execute("pool_count_fold", {})


@db.reads("wake_due")
@dataclass(frozen=True, slots=True)
class _Woken:
    pool: str
    count: int  # tasks of the pool queued again


def _wake(report: SweepReport, actor: str) -> None:
    """3. Due timers, and waiting parents whose children all finished (normally the
    last child wakes its parent; this catches a wake-up lost to a crash)."""
    with transaction.atomic(durable=True):
        for woke in db.fetchall("wake_due", {"actor": actor}, row=_Woken):
            report.woken += woke.count
            dispatch.pool_has_work(woke.pool, woke.count)


def _expire_approvals(report: SweepReport, actor: str) -> None:
    """Pending approvals past their expiry: expired, their tasks re-queued to run the
    agent's timeout branch (runtime/approvals/services.py)."""
    with transaction.atomic(durable=True):
        report.approvals_expired += approvals_expire_due(actor=actor)


def _settle_stops(report: SweepReport, actor: str) -> None:
    """3b. Stopping tasks whose stop's bound passed: cancelled anyway, leaves first, with
    the acknowledgments that never came listed (runtime/stops/)."""
    report.stops_bounded += stops_settle_due(actor=actor)


def _triggers(report: SweepReport, actor: str) -> None:
    """3c. Due cron ticks, each fired once however many supervisors race it, and
    dependency triggers whose prerequisites settled (runtime/triggers/)."""
    report.scheduled += sum(1 for fired in schedules_fire_due(actor=actor) if fired.outcome == "fired")
    report.triggered += dependencies_settle(actor=actor)


@db.reads("stale_queued")
@dataclass(frozen=True, slots=True)
class _Stale:
    name: str  # a pool with queued work waiting too long and a free slot


def _redispatch(report: SweepReport) -> None:
    """4. Queued tasks older than REDISPATCH_SECONDS in a pool with free slots: their
    wake-up was lost (broker restart, worker killed with a prefetched message)."""
    for stale in db.fetchall("stale_queued", {"age": config.redispatch_seconds()}, row=_Stale):
        report.redispatched += 1
        dispatch.send(stale.name)
