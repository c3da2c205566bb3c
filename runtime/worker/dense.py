"""The dense worker: many attempts in one process, each in a thread of its own
(docs/adr/0033-dense-worker.md).

Celery still runs the solo pool, and only delivers wake-ups: on one, the process takes a
free place (one of STEWARD_WORKER_ATTEMPTS, or `celery worker --attempts N`) and starts a
thread there that drains the pool as a solo worker does (executor.run_pool): PostgreSQL's
claim decides what runs, so fleet pool limits hold exactly as with solo workers. Each
claim that finds a task starts the next claimer in another free place (_spread), so a
backlog fills the places without a broker message each. When
every place is taken the process claims nothing: it remembers the pool, and the next
place to free claims from it (the supervisor re-sends a wake-up that is lost anyway).

The rest is the solo worker's, per attempt: the lease keeper renews every lease the
process holds in one statement per heartbeat; the stop watcher delivers a stop into one
attempt's thread; connections are handed back to the pool whenever agent code runs
(runtime/attempts/connections.py). A step that ignores its stop past the grace cannot
end the process (that would end every attempt in it): the watcher releases that attempt
by force, as a solo worker does before it exits, and abandon() gives its place back; the
thread runs on unowned, every write of it refused by the fence.
"""

from __future__ import annotations

import logging
import threading

from django.db import connection

from runtime.attempts import connections, dispatch
from runtime.worker import executor
from runtime.worker.stop_watch import watch

log = logging.getLogger(__name__)


class Places:
    """How many attempts this process runs, and which pools wait for a place."""

    def __init__(self, size: int):
        self.size = size
        self._taken = 0
        self._abandoned: set[int] = set()  # threads whose place abandon() gave back
        self._wanted: list[str] = []  # pools woken while every place was taken, oldest first
        self._changed = threading.Condition()

    @property
    def taken(self) -> int:
        return self._taken

    def take_or_want(self, pool: str) -> bool:
        """Take a place, or, with none free, remember that `pool` has work: one check, so a
        place freed meanwhile cannot miss the pool."""
        with self._changed:
            if self._taken < self.size:
                self._taken += 1
                return True
            if pool not in self._wanted:
                self._wanted.append(pool)
            return False

    def next_or_free(self) -> str | None:
        """For a thread whose drain ended: the next pool that waited for a place (it keeps
        its place), or None, its place freed."""
        with self._changed:
            ident = threading.get_ident()
            if ident in self._abandoned:
                self._abandoned.discard(ident)
                return None  # abandon() gave its place back already
            if self._wanted and not executor.stopping():
                return self._wanted.pop(0)
            self._taken -= 1
            wanted, self._wanted = self._wanted, []
            self._changed.notify_all()
        for pool in wanted:  # shutting down: another worker takes them
            dispatch.send(pool)
        return None

    def free(self) -> None:
        """The calling thread's place is free (unless abandon() freed it already)."""
        with self._changed:
            ident = threading.get_ident()
            if ident in self._abandoned:
                self._abandoned.discard(ident)
                return
            self._taken -= 1
            self._changed.notify_all()

    def abandon(self, thread: int) -> None:
        """The attempt on `thread` was released by force and its thread runs on unowned:
        its place is free now, and the thread, if it ever ends, frees nothing."""
        with self._changed:
            if thread not in self._abandoned:
                self._abandoned.add(thread)
                self._taken -= 1
                self._changed.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every place is free (a warm shutdown); whether they all are."""
        with self._changed:
            return self._changed.wait_for(lambda: self._taken <= 0, timeout)


_configured: dict[str, Places] = {}  # "places": this process's, once it is a dense worker


def places() -> Places | None:
    """This process's places, or None for a solo worker."""
    return _configured.get("places")


def configure(attempts: int) -> None:
    """Run `attempts` attempts at once in this process (1: the solo worker, unchanged)."""
    if attempts <= 1:
        _configured.clear()
        watch.on_abandon = None
        return
    _configured["places"] = here = Places(attempts)
    connections.enable()
    watch.on_abandon = here.abandon
    log.info("dense worker: %d places", attempts)


def wake(pool: str) -> int:
    """A wake-up for `pool` (the Celery task's body): start a thread in a free place that
    drains it; 1 if one started. Returns at once, so the next wake-up is read."""
    here = places()
    assert here is not None
    if executor.stopping():
        dispatch.send(pool)  # hand the wake-up to a worker that is staying
        return 0
    return _start(here, pool)


def _start(here: Places, pool: str) -> int:
    if not here.take_or_want(pool):
        return 0
    threading.Thread(target=_place, args=(pool,), name=f"steward-place-{pool}", daemon=True).start()
    return 1


def _spread(pool: str) -> None:
    """A place claimed a task of `pool`: start the next claimer in a free place, so one
    wake-up fills as many places as the pool has queued work (after a kill -9, the
    supervisor re-queues hundreds at once; they need not wait for a message each). The
    claimer that finds nothing frees its place; PostgreSQL's claim keeps the pool's limit."""
    here = places()
    if here is not None and not executor.stopping():
        _start(here, pool)


def _place(pool: str | None) -> None:
    here = places()
    assert here is not None
    worker = executor.worker_id()
    holding = True
    try:
        while pool is not None:
            try:
                executor.run_pool(pool=pool, worker=worker, claimed=_spread)
            except Exception:
                log.exception("a place of the dense worker failed draining pool %s", pool)
            finally:
                connection.close()  # back to the pool between drains
            if executor.abandoned_here():
                break  # released by force: abandon() gave the place back, claim nothing more
            pool = here.next_or_free()
        holding = pool is not None
    finally:
        # A stop delivered just as its attempt ended (its region left) would end the
        # thread above without next_or_free: the place is freed all the same.
        if holding:
            here.free()
