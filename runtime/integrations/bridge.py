"""An agent framework (Pydantic AI, the OpenAI Agents SDK) runs on an event loop; a
Context is called on the attempt's own thread.

The attempt's thread is where Steward's work must happen: a stop is delivered to it by a
signal (runtime/worker/stop_watch.py), its regions say where that may interrupt
(runtime/attempts/interrupts.py), and the journal's writes use Django's connection, which
refuses to be used from a thread running an event loop. So the agent's run gets an event
loop on a thread of its own, and each ctx call it makes is handed to the attempt's
thread, which runs them one at a time, in the order the run asks for them, and hands the
answer back. A ctx call that raises ends the run: the loop is cancelled and the error is
raised on the attempt's thread as the ctx call raised it, so the executor sees a stop, a
fence, a denial or a lost database exactly as it would from a plain agent, whatever the
framework's own code would have caught.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any

_DONE = object()
_JOIN_SECONDS = 5.0  # a cancelled run unwinds in far less; a daemon thread if it does not
# The attempt's thread never blocks longer than this in one call: a dense worker delivers a
# stop into the thread as an asynchronous exception (interrupts.deliver), which Python
# raises only between bytecodes, never inside a blocking lock wait.
_WAKE_SECONDS = 0.05


class Bridge:
    def __init__(self, name: str):
        self.name = name
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._tools: set[asyncio.Task] = set()  # tool bodies running for the attempt's thread

    # --- on the run's loop --------------------------------------------------------------

    async def call(self, fn: Callable[..., Any], /, *args, **kwargs) -> Any:
        """fn(*args, **kwargs) on the attempt's thread (a ctx method); its answer here."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((fn, args, kwargs, future))
        return await asyncio.wrap_future(future)

    # --- on the attempt's thread ----------------------------------------------------------

    def on_loop(self, coroutine: Coroutine, context: contextvars.Context) -> Any:
        """Run `coroutine` on the run's loop, in `context` (the run's context variables),
        and wait for it here: the body of a ctx.step (a tool's own code), which the
        attempt's thread runs while the loop waits for it."""
        loop = self._loop
        assert loop is not None
        done: concurrent.futures.Future = concurrent.futures.Future()

        def start() -> None:
            task = loop.create_task(coroutine, context=context)
            self._tools.add(task)
            task.add_done_callback(lambda task: self._settle(task, done))

        loop.call_soon_threadsafe(start)
        while True:
            try:
                return done.result(timeout=_WAKE_SECONDS)
            except concurrent.futures.TimeoutError:
                if done.done():
                    raise  # the tool's own TimeoutError, not our wait's

    def _settle(self, task: asyncio.Task, done: concurrent.futures.Future) -> None:
        self._tools.discard(task)
        if task.cancelled():
            done.cancel()
        elif task.exception() is not None:
            done.set_exception(task.exception())
        else:
            done.set_result(task.result())

    def run(self, main: Callable[[], Coroutine]) -> Any:
        """Run main() on a loop of its own thread; serve its ctx calls here until it ends."""
        outcome: concurrent.futures.Future = concurrent.futures.Future()
        started = threading.Event()
        thread = threading.Thread(target=self._serve_loop, args=(main, outcome, started), daemon=True, name=self.name)
        thread.start()
        started.wait()
        try:
            while (item := self._next()) is not _DONE:
                fn, args, kwargs, future = item
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:
                    future.set_exception(exc)
                    raise
        finally:
            self._cancel(thread)
        return outcome.result()

    def _next(self):
        while True:
            try:
                return self._calls.get(timeout=_WAKE_SECONDS)
            except queue.Empty:
                continue

    def _serve_loop(self, main, outcome: concurrent.futures.Future, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(main())
            started.set()
            outcome.set_result(loop.run_until_complete(self._task))
        except BaseException as exc:
            outcome.set_exception(exc)
        finally:
            started.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._calls.put(_DONE)

    def _cancel_on_loop(self, task: asyncio.Task) -> None:
        for running in [task, *self._tools]:
            running.cancel()

    def _cancel(self, thread: threading.Thread) -> None:
        """The attempt's thread leaves (the run ended, or a ctx call or a stop raised
        here): a run still going is cancelled, and calls it still asks for are refused."""
        loop, task = self._loop, self._task
        if thread.is_alive() and loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._cancel_on_loop, task)
            except RuntimeError:
                pass  # the loop closed meanwhile: nothing left to cancel
        thread.join(_JOIN_SECONDS)
        while True:
            try:
                item = self._calls.get_nowait()
            except queue.Empty:
                return
            if item is not _DONE:
                item[3].set_exception(asyncio.CancelledError())
