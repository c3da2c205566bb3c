"""Where a stop may interrupt the thread that runs an attempt.

A stop is delivered into the running step by a signal to the thread running it
(runtime/worker/stop_watch.py), whose handler raises StopRequested. That must happen in
agent code only, never in the middle of Steward's own writes: an exception raised
inside a psycopg round trip of the journal or the ledger would leave the connection,
and what was written, in doubt. So every stretch of code an attempt runs says what it
is, innermost last:

    AGENT      agent code: the step's function, an effect's function. Interrupted at once.
    STEWARD    a ctx call's own work (the journal, the ledger, minting a token).
               Never interrupted; a stop seen meanwhile is raised as it returns to agent
               code, or its next write is refused by the fence (status is not running).
    GATEWAY    waiting for the credential gateway. The gateway itself cuts a stopped
               task's stream at its next chunk (TASK_STOPPED) and acknowledges with what
               it cut; the worker interrupts the wait only GATEWAY_WAIT_SECONDS after it
               saw the stop, for a call that sends no chunk (one that never returns).

Outside any of them (the executor before and after the agent's code) nothing is
interrupted: the attempt's end is a fenced write, refused for a stopped task.

A dense worker runs its attempts in threads other than the main one, which a signal
cannot reach: there the stop is raised in the attempt's thread with
PyThreadState_SetAsyncExc (deliver() below), and only while that thread is in agent
code. The exception is raised at the thread's next bytecode boundary, so a delivery and
the thread's move into Steward's own code race: each region change and each delivery
take the attempt's lock, and a move into a region that must not be interrupted cancels
a delivery still pending. The window that remains is the few bytecodes of region()
itself, before Steward writes anything. A thread blocked in one long C call (a sleep, a
socket read with no data) sees the exception only when the call returns: past the
grace such an attempt is released by force and its thread abandoned
(runtime/worker/stop_watch.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from dataclasses import dataclass, field

from runtime.attempts import connections
from runtime.errors import StopRequested

AGENT, STEWARD, GATEWAY = "agent", "steward", "gateway"
GATEWAY_WAIT_SECONDS = 1.0


@dataclass
class Running:
    """The attempt one thread runs, and whether a stop of it was seen (and when)."""

    task_id: object
    epoch: int
    thread: int
    regions: list = field(default_factory=list)
    seen_at: float | None = None  # time.monotonic() when the worker saw the stop
    where: str = ""  # how it was seen: "notified", "lease renewal"
    forced: bool = False  # ended by force (runtime/worker/stop_watch.py)
    # Its tree was paused (runtime/limits/pauses.py): the attempt ends before its next new
    # step (runtime/limits/breakers.py StepBreakers). Never interrupts the step it is in.
    paused: bool = False
    # A dense worker's delivery (deliver()): set while an exception is pending in the thread.
    pending: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def interruptible(self) -> bool:
        return bool(self.regions) and self.regions[-1] in (AGENT, GATEWAY)

    def due(self, now: float | None = None) -> bool:
        """Whether a stop should be raised here now."""
        if self.seen_at is None or not self.regions:
            return False
        region = self.regions[-1]
        if region == AGENT:
            return True
        now = time.monotonic() if now is None else now
        return region == GATEWAY and now - self.seen_at >= GATEWAY_WAIT_SECONDS


_lock = threading.Lock()
_running: dict[int, Running] = {}


def begin(task_id, epoch: int) -> Running:
    """The calling thread starts running this attempt."""
    run = Running(task_id, epoch, threading.get_ident())
    with _lock:
        _running[run.thread] = run
    return run


def end() -> None:
    with _lock:
        _running.pop(threading.get_ident(), None)


def running() -> list[Running]:
    with _lock:
        return list(_running.values())


def current() -> Running | None:
    return _running.get(threading.get_ident())


def seen(task_id, epoch: int, *, where: str) -> Running | None:
    """A stop of this attempt was seen: remember when (the grace counts from here).
    Returns the attempt's Running, or None if no thread here runs it."""
    with _lock:
        for run in _running.values():
            if run.task_id == task_id and run.epoch == epoch:
                if run.seen_at is None:
                    run.seen_at, run.where = time.monotonic(), where
                return run
    return None


def pause_seen(task_id, epoch: int) -> None:
    """This attempt's tree was paused (seen by the stop watcher or the lease keeper)."""
    with _lock:
        for run in _running.values():
            if run.task_id == task_id and run.epoch == epoch:
                run.paused = True


@contextlib.contextmanager
def region(kind: str):
    """Run the block as `kind`. Leaving a STEWARD or GATEWAY block normally, back into
    code that may be interrupted, raises a stop that was seen meanwhile."""
    run = current()
    if run is None:
        yield
        return
    _enter(run, kind)
    try:
        yield
    finally:
        _leave(run)
    raise_if_due(run, "returning to agent code")


def _enter(run: Running, kind: str) -> None:
    if kind in (AGENT, GATEWAY):
        # No connection is held while agent code waits (a dense worker). Handed back
        # before the region opens: the statement that unmarks it is Steward's own, and
        # must not be where a stop lands.
        connections.hand_back()
    with run.lock:
        run.regions.append(kind)
        if not run.interruptible():
            _cancel_pending(run)


def _leave(run: Running) -> None:
    if len(run.regions) > 1 and run.regions[-2] in (AGENT, GATEWAY):
        connections.hand_back()  # back to agent code: as _enter, before it is interruptible
    with run.lock:
        run.regions.pop()
        if not run.interruptible():
            _cancel_pending(run)


def _cancel_pending(run: Running) -> None:
    """Called with run.lock held, by the attempt's own thread: a stop delivered into agent
    code that has not been raised yet must not land in Steward's own code."""
    if run.pending:
        run.pending = False
        _set_async_exc(run.thread, None)


def deliver(run: Running) -> bool:
    """Raise StopRequested in `run`'s thread (not the main one) if it is where a stop may
    interrupt it now; whether it was sent. Sent again by the watcher until the attempt ends."""
    with run.lock:
        if not run.due():
            return False
        run.pending = True
        return _set_async_exc(run.thread, Delivered) == 1


def _set_async_exc(thread: int, exc) -> int:
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc) if exc else None)


class Delivered(StopRequested):
    """The stop as deliver() raises it: built in the attempt's own thread, with no
    arguments (the interpreter instantiates the class), so it reads the attempt there."""

    def __init__(self, *args):
        run = current()
        if args or run is None:
            super().__init__(*(args or ("?", 0, "in agent code")))
            return
        run.pending = False
        where = run.regions[-1] if run.regions else AGENT
        super().__init__(run.task_id, run.epoch, f"in {where} code")


def raise_if_due(run: Running | None, where: str) -> None:
    if run is not None and run.due():
        raise StopRequested(run.task_id, run.epoch, where)


def handler(signum, frame) -> None:
    """The stop signal's handler (in the main thread, between two bytecodes, or as a
    blocking call there returns EINTR): raise where the attempt may be interrupted,
    ignore it elsewhere (the watcher sends it again until the attempt has ended)."""
    run = current()
    if run is not None and run.due():
        raise StopRequested(run.task_id, run.epoch, f"in {run.regions[-1]} code")
