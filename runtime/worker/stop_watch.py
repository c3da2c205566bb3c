"""The worker boundary of a stop: seeing it promptly, delivering it into the running
step, and ending by force an attempt whose step ignores it (docs/adr/0016-stops.md,
"The worker and the gateway").

1. **Seeing it.** A daemon thread per worker process LISTENs on `steward_stop` (the stop's
   transaction notifies at commit: runtime/sql/stop_notify.sql) on a connection of its
   own, and on each notification reads the status of the tasks this process runs. If
   that connection is lost it reconnects with backoff, and meanwhile the lease keeper
   sees the stop at its next renewal (leases_renew.sql returns the task's status), so a
   lost notification costs at most a heartbeat.
2. **Delivering it.** The attempt runs in the process's main thread (a Celery prefork
   child, or the solo pool's only thread). The watcher signals it (STOP_SIGNAL, a
   real-time signal Celery and billiard leave alone); the handler raises StopRequested
   where the code may be interrupted (runtime/attempts/interrupts.py), which also ends a
   blocking call (a sleep, a socket read) there. The executor ends the attempt and
   acknowledges: worker {"ended": "cleanly"}. The signal is sent again every
   RESIGNAL_SECONDS, so a step that swallowed it is interrupted again, and its next
   write is refused by the fence anyway.
3. **By force.** An attempt still running STOP_GRACE_SECONDS after its stop was seen is
   ended from this thread: its release and the worker's acknowledgment {"ended": "by
   force"} commit together (the attempt ends and its slot is freed), and then the
   process exits at once (os._exit): Python cannot end a thread that will not stop. A
   prefork child is replaced by Celery's master; a solo worker is gone, and its service
   manager starts it again. A dense worker (runtime/worker/dense.py) runs other attempts
   that must not die with this one: it abandons the thread instead (on_abandon).

A dense worker's attempts run in threads of their own, which no signal reaches: the
stop is raised there by interrupts.deliver (PyThreadState_SetAsyncExc), under the same
rule (agent code only).

The same notification carries a tree's pause (runtime/limits/pauses.py): a running
task of a paused tree is not interrupted, only marked, and ends before its next new step.

Only processes that enable() it (Celery workers: runtime/worker/celery_tasks.py) are
watched; elsewhere (a test session running attempts in-process) a stop ends the attempt
at its next write, as the fence decides.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass

import psycopg
from django.conf import settings
from django.db import connection, transaction

from runtime import config, db, faults, outages, states
from runtime.attempts import interrupts
from runtime.attempts.lease import keeper
from runtime.attempts.transitions import release_stopped
from runtime.stops.services import lock_chain, stop_ack

log = logging.getLogger(__name__)

STOP_SIGNAL = signal.SIGRTMIN + 5 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR2
RESIGNAL_SECONDS = 0.2
IDLE_WAIT_SECONDS = 1.0
STOPPED = (states.STOPPING, states.CANCELLED)
EXIT_FORCED = 70  # EX_SOFTWARE: what billiard's own forced exits use
# Django's options that are not libpq's (console/settings.py).
_NOT_LIBPQ = {"pool", "prepare_threshold", "isolation_level", "server_side_binding", "assume_role", "cursor_factory"}


@db.reads("watch_tasks")
@dataclass(frozen=True, slots=True)
class _Watched:
    id: object  # a task this process runs
    epoch: int
    status: str
    paused: bool  # its tree has an open pause


class StopWatch:
    def __init__(self):
        self.enabled = False
        self.force_exit = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self._quit = threading.Event()
        # A dense worker's (runtime/worker/dense.py): called with the thread of an attempt
        # released by force, instead of ending the process.
        self.on_abandon = None

    def enable(self, *, force_exit: bool = True) -> None:
        """Watch the attempts this process runs. `force_exit`: end the process when a
        step ignores its stop past the grace (a worker process; never a test session)."""
        self.enabled, self.force_exit = True, force_exit
        keeper.observe(self._renewed)

    def hold(self, lease) -> interrupts.Running:
        """The calling thread starts running `lease`'s attempt."""
        run = interrupts.begin(lease.task_id, lease.epoch)
        if not self.enabled:
            return run
        # Installed from the main thread (the only one that may), before the watcher
        # could ever send it for this attempt; a prefork child inherits it.
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(STOP_SIGNAL) is not interrupts.handler
        ):
            signal.signal(STOP_SIGNAL, interrupts.handler)
        with self._lock:
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._quit.clear()
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="steward-stop-watch", daemon=True)
                self._thread.start()
        return run

    def drop(self) -> None:
        interrupts.end()

    def stop(self) -> None:
        """End the watcher thread (tests)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._quit.set()
            thread.join(5)

    # --- the watcher thread ---------------------------------------------------------------

    def _run(self) -> None:
        delays = None
        listener = None
        try:
            while not self._quit.is_set():
                if listener is None:
                    try:
                        listener = _listen()
                    except psycopg.Error as exc:
                        outages.database.failed(exc)
                        delays = delays or outages.backoff()
                        self._quit.wait(min(next(delays), IDLE_WAIT_SECONDS))
                        self._tend()  # the keeper's renewals may have seen a stop meanwhile
                        continue
                    delays = None
                    self._check(listener)  # notifications sent while we were away are lost
                try:
                    timeout = RESIGNAL_SECONDS if self._delivering() else IDLE_WAIT_SECONDS
                    if _notified(listener, timeout):
                        self._check(listener)
                except psycopg.Error as exc:
                    log.info("the stop listener lost its connection (%s); reconnecting", type(exc).__name__)
                    _close(listener)
                    listener = None
                    continue
                self._tend()
        except Exception:
            log.exception("the stop watcher stopped")
        finally:
            _close(listener)
            connection.close()

    def _check(self, listener) -> None:
        """Read the status of the tasks this process runs; note the stopped ones, and the
        ones whose tree was paused (runtime/limits/pauses.py)."""
        runs = interrupts.running()
        if not runs:
            return
        cur = listener.execute(db.sql("watch_tasks"), {"tasks": [run.task_id for run in runs]})
        for watched in db.rows(cur, "watch_tasks", _Watched):
            if watched.status in STOPPED:
                self._seen(watched.id, watched.epoch, "notified")
            elif watched.paused:
                interrupts.pause_seen(watched.id, watched.epoch)  # it ends before its next new step

    def _renewed(self, task_id, epoch: int, status: str) -> None:
        """The lease keeper's renewal read the task's status (its thread). It also tends
        the stops seen, so a watcher stuck reconnecting still ends them on time."""
        if status in STOPPED:
            self._seen(task_id, epoch, "lease renewal")
            self._tend()

    def _seen(self, task_id, epoch: int, where: str) -> None:
        run = interrupts.seen(task_id, epoch, where=where)
        if run is not None and self.enabled:
            self._deliver(run)

    def _delivering(self) -> bool:
        return any(run.seen_at is not None for run in interrupts.running())

    def _tend(self) -> None:
        """Signal every attempt whose stop was seen again, and force the ones past grace."""
        grace = config.stop_grace_seconds()
        now = time.monotonic()
        for run in interrupts.running():
            if run.seen_at is None or run.forced:
                continue
            try:
                if now - run.seen_at >= grace:
                    self._force(run, now - run.seen_at)
                else:
                    self._deliver(run)
            except Exception:
                log.exception("could not end the stopped attempt %s of %s", run.epoch, run.task_id)
                db.discard_connection()

    def _release_by_force(self, run: interrupts.Running, actor: str, detail: dict) -> bool:
        """End the attempt and acknowledge "by force" in one transaction, locking the task's
        rows first (the order of a stop and the sweep). A statement timeout or a deadlock
        on a loaded database is tried again while the lease still holds: the process is
        alive and renewing it, and a record written here says what happened where the
        supervisor's, after the lease lapses, could only say "lease lapsed". Past that,
        or with the database gone, it gives up and the supervisor releases the attempt
        once the process has exited and stopped renewing it."""
        until = time.monotonic() + config.lease_seconds() / 2
        delays = outages.backoff()
        while True:
            try:
                with transaction.atomic(durable=True):
                    lock_chain(run.task_id)
                    released = release_stopped(task_id=run.task_id, epoch=run.epoch, end_reason="forced", actor=actor)
                    if released:
                        stop_ack(task_id=run.task_id, boundary=states.WORKER, by=actor, detail=detail)
                return released
            except db.CONNECTION_ERRORS as exc:
                db.discard_connection()
                outages.database.failed(exc)
                delay = next(delays)
                if time.monotonic() + delay >= until:
                    log.warning(
                        "could not end the stopped attempt %s of %s (%s); exiting, the supervisor "
                        "releases it when its lease lapses",
                        run.epoch,
                        run.task_id,
                        exc,
                    )
                    return True
                log.info(
                    "ending the stopped attempt %s of %s failed (%s); trying again",
                    run.epoch,
                    run.task_id,
                    type(exc).__name__,
                )
                time.sleep(delay)

    def _deliver(self, run: interrupts.Running) -> None:
        if run.thread != threading.main_thread().ident:
            # A dense worker's attempt, in a thread of its own: no signal reaches it, so
            # the exception is raised in that thread directly (interrupts.deliver).
            interrupts.deliver(run)
            return
        try:
            signal.pthread_kill(run.thread, STOP_SIGNAL)
        except (ProcessLookupError, OSError):
            pass  # the thread is gone: so is the attempt

    def _force(self, run: interrupts.Running, after: float) -> None:
        """The step ignored the stop for the whole grace: end the attempt here, then the
        process. The release and the acknowledgment commit first, so the stop's record
        is complete before anything dies; a release that matches nothing (the attempt
        ended meanwhile) changes nothing and ends nothing."""
        worker = f"{socket.gethostname()}:{os.getpid()}"
        actor = f"worker:{worker}"
        detail = {
            "ended": "by force",
            "after_seconds": round(after, 3),
            "epoch": run.epoch,
            "worker": worker,
            "seen": run.where,
        }
        released = self._release_by_force(run, actor, detail)
        if not released:
            return
        run.forced = True
        if run.thread != threading.main_thread().ident and self.on_abandon is not None:
            # A dense worker: exiting would end every other attempt of the process. The
            # attempt is released and acknowledged; its thread runs on unowned (each of
            # its writes refused by the fence) and its place is given back.
            log.warning(
                "task %s epoch %s ignored its stop for %.1f s: released by force, its thread abandoned",
                run.task_id,
                run.epoch,
                after,
            )
            keeper.drop_epoch(run.task_id, run.epoch)
            self.on_abandon(run.thread)
            return
        log.warning(
            "task %s epoch %s ignored its stop for %.1f s: ending the process by force", run.task_id, run.epoch, after
        )
        if self.force_exit:
            logging.shutdown()
            os._exit(EXIT_FORCED)
        # In-process (a test): the attempt's record is complete; its thread runs on, and
        # each of its writes is refused.


def _listen():
    faults.reach(faults.BEFORE_STOP_LISTEN, task_id="worker", step="listen", epoch=0)
    params = settings.DATABASES["default"]
    options = {k: v for k, v in params.get("OPTIONS", {}).items() if k not in _NOT_LIBPQ}
    listener = psycopg.connect(
        dbname=params["NAME"],
        user=params.get("USER") or None,
        password=params.get("PASSWORD") or None,
        host=params.get("HOST") or None,
        port=params.get("PORT") or None,
        autocommit=True,
        connect_timeout=5,
        **options,
    )
    listener.execute("LISTEN steward_stop")
    return listener


def _notified(listener, timeout: float) -> bool:
    got = False
    for _ in listener.notifies(timeout=timeout, stop_after=1):
        got = True
    return got


def _close(listener) -> None:
    if listener is not None:
        with contextlib.suppress(psycopg.Error):
            listener.close()


watch = StopWatch()
