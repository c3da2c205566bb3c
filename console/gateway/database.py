"""The gateway's database work, off the event loop.

The gateway's views are async (docs/adr/0031-asgi-gateway.md): one event loop carries
every stream of the process, and a database statement run on it would stop them all.
The runtime's services are sync (Django's connection, runtime/db.py's prepared
statements), so they run here, in a few threads of the process's own (`THREADS`,
STEWARD_GATEWAY_DB_THREADS), each with its Django connection from the process's psycopg
pool. However many streams are open, the gateway holds at most that many connections:
a stream needs one only for its admission, for its finish, and as one of the calls
that the process's watcher rechecks in one statement (console/gateway/streams.py).

A thread keeps its connection while work keeps coming, so a busy gateway pays the
pool's health check once, not per statement, and hands it back to the pool after
`LINGER_SECONDS` without work: an idle gateway holds none. A connection that failed
(the server restarted, a statement timed out) is closed at once, and the next
statement takes a fresh one.

A job, once queued, runs to its end, even if the coroutine that awaits it is cancelled
(the worker hung up): an admission that committed must still be finished, and `run`'s
`abandoned` callback is given what the job returned so it can be.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading

import django.db
from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)

LINGER_SECONDS = 1.0


class _Job:
    __slots__ = ("fn", "args", "kwargs", "loop", "future", "abandoned", "done", "result", "error", "lock")

    def __init__(self, fn, args, kwargs, loop, abandoned):
        self.fn, self.args, self.kwargs, self.loop = fn, args, kwargs, loop
        self.future = None if loop is _NO_LOOP else loop.create_future()
        self.abandoned = abandoned  # called with the result if no one awaits it any more
        self.done = False
        self.result = self.error = None
        self.lock = threading.Lock()


class Statements:
    """`THREADS` threads taking jobs from one queue; started on first use."""

    def __init__(self, threads: int):
        self.threads = threads
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._started = 0
        self._lock = threading.Lock()

    async def run(self, fn, *args, abandoned=None, **kwargs):
        """fn(*args, **kwargs) in a database thread; its result, or its exception. If the
        awaiting coroutine is cancelled, the job still runs to its end, and then
        `abandoned(result)` runs in that thread (not on an exception)."""
        self._start()
        job = _Job(fn, args, kwargs, asyncio.get_running_loop(), abandoned)
        self._queue.put(job)
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            with job.lock:
                finished, job.future = job.done, None  # the thread sees no one is waiting
            if finished and job.error is None and abandoned is not None:
                # It ended just before the cancellation: its result went nowhere.
                self.submit(abandoned, job.result)
            raise

    def submit(self, fn, *args, **kwargs) -> None:
        """fn(*args, **kwargs) in a database thread, not awaited (its error is logged)."""
        self._start()
        self._queue.put(_Job(fn, args, kwargs, _NO_LOOP, None))

    def _start(self) -> None:
        if self._started >= self.threads:
            return
        with self._lock:
            while self._started < self.threads:
                self._started += 1
                # Not a daemon: at exit, the jobs queued (a finish) still run.
                threading.Thread(target=self._work, name=f"gateway-db-{self._started}").start()

    def _work(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=LINGER_SECONDS)
            except queue.Empty:
                connection.close()  # idle: the connection goes back to the pool
                job = self._queue.get()
            if job is None:
                connection.close()
                return
            self._do(job)

    def _do(self, job: _Job) -> None:
        try:
            result, error = job.fn(*job.args, **job.kwargs), None
        except BaseException as exc:
            result, error = None, exc
            if isinstance(exc, django.db.Error) or connection.errors_occurred:
                _discard()
        with job.lock:
            job.done, job.result, job.error = True, result, error
            future = job.future
        if future is None or job.loop is _NO_LOOP:
            if error is not None:
                log.error("gateway database job %s failed", getattr(job.fn, "__name__", job.fn), exc_info=error)
            elif job.abandoned is not None:
                try:
                    job.abandoned(result)
                except Exception:
                    log.exception("gateway database job %s: its abandoned callback failed", job.fn)
            return
        try:
            job.loop.call_soon_threadsafe(_settle, future, result, error)
        except RuntimeError:  # the loop closed (shutdown): no one is waiting
            pass

    def stop(self) -> None:
        """End the threads once the jobs queued before this have run (tests)."""
        with self._lock:
            for _ in range(self._started):
                self._queue.put(None)
            self._started = 0


_NO_LOOP = object()


def _settle(future: asyncio.Future, result, error) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _discard() -> None:
    """After a database error: close this thread's connection, so the next job takes a
    fresh one from the pool (which drops a broken one rather than lending it again)."""
    try:
        connection.close()
    except django.db.Error:
        pass


statements = Statements(settings.GATEWAY["DB_THREADS"])
