"""The public in-process harness, for testing agents on Steward without worker processes.

    from runtime.testing import StewardTestEnv

    @pytest.fixture
    def steward(transactional_db):      # pytest-django; `db` works too (see below)
        with StewardTestEnv() as env:
            yield env

    def test_the_report_waits_a_day_then_sends(steward):
        task = steward.submit("reports.daily", {"to": "ops"})
        steward.run_until_idle()
        assert steward.result(task).status == "sleeping"
        steward.advance(86_400)
        steward.run_until_idle()
        assert steward.result(task).output == {"sent": True}

What it plays, in this process and on this thread, with the code a real fleet runs:
- **The worker loop**: run_until_idle() sweeps as the supervisor does (due timers,
  expired leases, expired approvals, cron ticks, dependency triggers) and claims and runs
  queued tasks as a worker does (runtime/worker/executor.py), until nothing more happens
  without time passing or a person acting. Wake-ups for Celery are not sent: the loop
  finds queued work in PostgreSQL, as a worker woken by them would.
- **Crashes at the named kill points** (runtime/faults.py): crash_at("between_steps",
  step="charge") makes the next attempt that reaches the point stop there as a SIGKILL
  would stop it: what it had committed stays, its open transaction is rolled back, its
  lease is no longer renewed. expire_leases() then lets the supervisor recover the task,
  and the next attempt replays the journal.
- **The clock**: advance(seconds) moves what PostgreSQL and Django's timezone.now() read
  as now, so sleeps, timers, lease and approval expiries and schedules come due without
  waiting (see install_clock() for how, and docs/adr/0023-test-tiers-and-the-harness.md).
- **Approvals**: approvals(), approve() and deny() decide as a person would in the console.

Under pytest-django's `transactional_db` every write commits, as in production. Under `db`
the test is one transaction that is rolled back at its end: faster, and PostgreSQL's
now() stands still for the whole test except when advance() moves it, so a sleep wakes
only when the test says so. A stop is seen at the attempt's next write (the fence), as
in any process that does not run Celery's stop watcher.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.db import DatabaseError, connection
from django.utils import timezone
from psycopg import sql

from runtime import config, db, faults, states
from runtime.approvals.selectors import approvals_of_task
from runtime.approvals.services import approval_decide
from runtime.attempts import dispatch
from runtime.models import Approval, AuditEvent, Step, Task
from runtime.tasks.services import task_submit
from runtime.worker import executor
from runtime.worker.supervisor import SweepReport, sweep

CLOCK_SCHEMA = "steward_test_clock"
# Ahead of pg_catalog, which PostgreSQL searches first unless the path names it: an
# unqualified now() then finds the harness's. public stays first, so every table and
# function the migrations made is found (and made) where it always was.
SEARCH_PATH = f'"$user", public, {CLOCK_SCHEMA}, pg_catalog'
# The clock's functions: the server's own, plus the skew the harness keeps in one row.
# Django's Now() is statement_timestamp(); the runtime's SQL says now() or clock_timestamp().
_SHIFTED = {
    "now": "STABLE",
    "statement_timestamp": "STABLE",
    "transaction_timestamp": "STABLE",
    "clock_timestamp": "VOLATILE",
}
CLOCK_DDL = [
    f"CREATE SCHEMA IF NOT EXISTS {CLOCK_SCHEMA}",
    f"CREATE TABLE IF NOT EXISTS {CLOCK_SCHEMA}.skew (one boolean PRIMARY KEY DEFAULT true CHECK (one), "
    "seconds float8 NOT NULL DEFAULT 0)",
    f"INSERT INTO {CLOCK_SCHEMA}.skew DEFAULT VALUES ON CONFLICT DO NOTHING",
    *(
        f"CREATE OR REPLACE FUNCTION {CLOCK_SCHEMA}.{name}() RETURNS timestamptz LANGUAGE sql {volatility} "
        f"AS $$ SELECT pg_catalog.{name}() + make_interval(secs => (SELECT seconds FROM {CLOCK_SCHEMA}.skew)) $$"
        for name, volatility in _SHIFTED.items()
    ),
]
# Django's options that are not libpq's (console/settings.py), as runtime/worker/stop_watch.py drops them.
_NOT_LIBPQ = {"pool", "prepare_threshold", "isolation_level", "server_side_binding", "assume_role", "cursor_factory"}


class Crashed(BaseException):
    """The harness's SIGKILL: raised at an armed kill point. A BaseException, so neither
    agent code's `except Exception` nor the executor's failure handling catches it."""

    def __init__(self, point: str, *, task_id, step: str, epoch: int):
        super().__init__(f"crashed at {point}@{step} (task {task_id}, epoch {epoch})")
        self.point, self.task_id, self.step, self.epoch = point, str(task_id), step, epoch


class StillBusy(AssertionError):
    """run_until_idle() ran out of rounds: an agent that never stops sleeping briefly, say."""


@dataclass(frozen=True)
class Result:
    """A task as the test reads it."""

    id: uuid.UUID
    agent: str
    status: str
    output: Any
    error: dict | None
    note: str
    blocked_reason: str | None
    epoch: int  # attempts so far
    wake_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status in states.TERMINAL


@dataclass(frozen=True)
class JournalRow:
    seq: int
    kind: str  # step, effect, sleep, spawn, wait, now, random, ...
    name: str
    epoch: int  # the attempt that wrote it
    output: Any
    error: dict | None


def install_clock(conn=connection) -> None:
    """Give the test database the controllable clock; once per database, idempotent.

    1. Refuse unless the database is a test database (its name starts with `test`): the
       harness never alters any other.
    2. On a connection of its own, in autocommit (so it holds under a `db` test's rollback
       too): make the schema CLOCK_SCHEMA with the one-row skew table and the functions
       now(), statement_timestamp(), transaction_timestamp() and clock_timestamp(), each the
       server's own plus the skew; then make SEARCH_PATH the database's default, so every
       new session (a worker process's too) finds them before pg_catalog's.
    3. Put this connection on SEARCH_PATH now, and hand back the pool's idle connections,
       which were opened before the default changed.

    Only statements are shifted: a column's DEFAULT was bound to pg_catalog's function when
    the migration made it (created_at and the like), and the server's own timeouts
    (statement_timeout, idle_in_transaction_session_timeout) keep real time. With the skew
    at 0 every function returns what pg_catalog's does.
    """
    params = conn.settings_dict
    name = params["NAME"]
    if not str(name).startswith("test"):
        raise RuntimeError(f"the test clock is for test databases only, not {name!r}")
    if _clock_in_path(conn):
        return
    options = {k: v for k, v in params.get("OPTIONS", {}).items() if k not in _NOT_LIBPQ}
    with psycopg.connect(
        dbname=name,
        user=params.get("USER") or None,
        password=params.get("PASSWORD") or None,
        host=params.get("HOST") or None,
        port=params.get("PORT") or None,
        autocommit=True,
        **options,
    ) as own:
        for statement in CLOCK_DDL:
            own.execute(statement)
        own.execute(sql.SQL("ALTER DATABASE {} SET search_path TO " + SEARCH_PATH).format(sql.Identifier(name)))
    with conn.cursor() as cur:
        cur.execute("SET search_path TO " + SEARCH_PATH)
    if not conn.in_atomic_block and getattr(conn, "pool", None) is not None:
        conn.close()
        conn.close_pool()


def _clock_in_path(conn) -> bool:
    """Whether this session already finds the clock's now() (the common case: one query)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT to_regnamespace(%s) IS NOT NULL AND %s = ANY (current_schemas(false))",
            [CLOCK_SCHEMA, CLOCK_SCHEMA],
        )
        return cur.fetchone()[0]


def clock_skew(conn=connection) -> float:
    with conn.cursor() as cur:
        cur.execute(f"SELECT seconds FROM {CLOCK_SCHEMA}.skew")
        return cur.fetchone()[0]


def set_clock_skew(seconds: float, conn=connection) -> None:
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {CLOCK_SCHEMA}.skew SET seconds = %s", [seconds])


class _NoKeeper:
    """Under a `db` test the lease keeper's own connection cannot see the test's rows, and
    the clock moves only when the test moves it: no lease lapses unless advance() says so."""

    def hold(self, lease) -> None:
        pass

    def drop(self, lease) -> None:
        pass


class StewardTestEnv:
    """One test's Steward: its worker loop, its clock, its kill points (see the module)."""

    def __init__(self, *, tenant: str = "acme", owner: str = "user:tester", worker: str = "steward-test"):
        self.tenant, self.owner, self.worker = tenant, owner, worker
        self.crashes: list[Crashed] = []  # every crash injected so far, in order
        self.wake_ups: list[tuple[str, int]] = []  # what would have gone to Celery: (pool, count)
        self._armed: list[tuple[str, str | None, str | None]] = []
        self._fired: set[tuple[str, str, str]] = set()
        self._undo: list = []
        self._skew = 0.0

    # --- entering and leaving -----------------------------------------------------------

    def __enter__(self) -> StewardTestEnv:
        install_clock()
        if clock_skew():
            set_clock_skew(0.0)  # another test's, left behind
        self._swap(dispatch, "send", lambda pool, count=1: self.wake_ups.append((pool, count)))
        real_now = timezone.now
        self._swap(timezone, "now", lambda: real_now() + timedelta(seconds=self._skew))
        if connection.in_atomic_block:  # a `db` test: see _NoKeeper
            self._swap(executor, "keeper", _NoKeeper())
        faults.intercept(self._reached)
        self._undo.append(lambda: faults.intercept(None))
        return self

    def __exit__(self, *exc) -> None:
        while self._undo:
            self._undo.pop()()
        if self._skew:
            try:
                set_clock_skew(0.0)  # a committed skew would outlive the test
            except DatabaseError:
                pass  # the test's transaction failed; rolling it back takes the skew with it
        executor.keeper.stop()

    def _swap(self, owner, name: str, value) -> None:
        old = getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, old))

    # --- tasks --------------------------------------------------------------------------

    def submit(
        self,
        agent: str,
        input: dict | None = None,
        *,
        tenant: str | None = None,
        owner: str | None = None,
        idempotency_key: str | None = None,
        pool: str | None = None,
    ) -> uuid.UUID:
        """Submit as the API does (runtime/tasks/services.py task_submit); the task's id."""
        owner = owner or self.owner
        return task_submit(
            agent=agent,
            input=input if input is not None else {},
            tenant=tenant or self.tenant,
            owner=owner,
            actor=owner,
            idempotency_key=idempotency_key,
            pool=pool,
        ).task_id

    def result(self, task_id) -> Result:
        t = Task.objects.get(id=task_id)
        return Result(t.id, t.agent, t.status, t.output, t.error, t.status_note, t.blocked_reason, t.epoch, t.wake_at)

    def journal(self, task_id) -> list[JournalRow]:
        rows = Step.objects.filter(task_id=task_id).order_by("seq")
        return [JournalRow(r.seq, r.kind, r.name, r.epoch, r.output, r.error) for r in rows]

    def events(self, task_id) -> list[str]:
        """The task's audit trail, oldest first, by kind (task.submitted, attempt.started, ...)."""
        return list(
            AuditEvent.objects.filter(task_id=task_id).order_by("chain_seq", "id").values_list("kind", flat=True)
        )

    # --- the worker loop ----------------------------------------------------------------

    def sweep(self) -> SweepReport:
        """One supervisor sweep (runtime/worker/supervisor.py)."""
        try:
            return sweep(supervisor_id=self.worker)
        except Crashed as crash:
            self.crashes.append(crash)
            return SweepReport()

    def run_once(self) -> int:
        """Claim and run what is queued, pool by pool, as a woken worker would; how many
        attempts ran (one that crashed counts)."""
        ran = 0
        pools = set(Task.objects.filter(status=states.QUEUED).values_list("pool", flat=True))
        for pool in sorted(pools):
            try:
                ran += executor.run_pool(pool=pool, worker=self.worker)
            except Crashed as crash:
                self.crashes.append(crash)
                ran += 1
        return ran

    def run_until_idle(self, *, max_rounds: int = 200) -> int:
        """Sweep and run until a round changes nothing; the attempts run. Tasks left
        sleeping, blocked or queued behind a held slot wait for advance() or a decision."""
        total = 0
        for _ in range(max_rounds):
            report = self.sweep()
            ran = self.run_once()
            total += ran
            if not ran and not _moved(report):
                return total
        raise StillBusy(f"still running after {max_rounds} rounds ({total} attempts)")

    # --- the clock ----------------------------------------------------------------------

    def now(self) -> datetime:
        """Now, on the database's clock (the one every stored time comes from)."""
        return db.clock()

    def advance(self, seconds: float) -> None:
        """Move the clock forward; nothing runs until run_until_idle() (or sweep())."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self._skew += seconds
        set_clock_skew(self._skew)

    def expire_leases(self) -> None:
        """Let every running attempt's lease lapse (a crashed worker renews nothing): the
        next sweep recovers their tasks, or dead-letters one that crashed too often."""
        self.advance(config.lease_seconds() + 1)

    # --- crashes ------------------------------------------------------------------------

    def crash_at(self, point: str, *, step: str | None = None, task_id=None) -> None:
        """Crash at `point` (runtime/faults.py POINTS), optionally only at the named step
        and task. Like a fault marker, each (task, point, step) crashes once: the attempt
        that recovers passes through."""
        if point not in faults.POINTS:
            raise ValueError(f"unknown kill point {point!r}; one of {', '.join(faults.POINTS)}")
        self._armed.append((point, step, None if task_id is None else str(task_id)))

    def rearm(self) -> None:
        """Let every armed point crash again (each crashed once per task, step and point)."""
        self._fired.clear()

    def _reached(self, point: str, *, task_id, step: str, epoch: int) -> None:
        key = (point, str(task_id), step)
        if key in self._fired:
            return
        for armed, armed_step, armed_task in self._armed:
            if armed == point and armed_step in (None, step) and armed_task in (None, str(task_id)):
                self._fired.add(key)
                raise Crashed(point, task_id=task_id, step=step, epoch=epoch)

    # --- approvals ----------------------------------------------------------------------

    def approvals(self, task_id, *, state: str | None = states.PENDING) -> list[Approval]:
        return [a for a in approvals_of_task(task_id=task_id) if state is None or a.state == state]

    def approve(self, task_id, *, by: str = "user:approver", comment: str = "") -> list[Approval]:
        """Approve every pending approval of the task, as `by` (a person, not its owner)."""
        return self._decide(task_id, "approve", by, comment)

    def deny(self, task_id, *, by: str = "user:approver", comment: str = "") -> list[Approval]:
        return self._decide(task_id, "deny", by, comment)

    def _decide(self, task_id, decision: str, by: str, comment: str) -> list[Approval]:
        pending = self.approvals(task_id)
        if not pending:
            raise AssertionError(f"task {task_id} has no pending approval to {decision}")
        return [
            approval_decide(approval_id=a.id, tenant=a.tenant, actor=by, decision=decision, comment=comment)
            for a in pending
        ]


def _moved(report: SweepReport) -> bool:
    """Whether a sweep changed what can run (re-sent wake-ups and seals change nothing)."""
    return any(v for k, v in report.as_dict().items() if k not in ("redispatched", "sealed"))
