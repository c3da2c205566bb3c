"""A dense worker's stop delivery into one attempt's thread (runtime/attempts/interrupts.py
deliver: PyThreadState_SetAsyncExc), in-process: no database, real threads.

It must raise StopRequested in that thread while it runs agent code, never inside
Steward's own code (a journal write cut midway), and never in another attempt's thread."""

from __future__ import annotations

import threading
import time

from runtime.attempts import interrupts
from runtime.errors import StopRequested
from tests.harness import wait_until


class _Attempt(threading.Thread):
    """Runs `body(run)` as an attempt's thread, and keeps what ended it."""

    def __init__(self, task_id: str, body):
        super().__init__(daemon=True)
        self.task_id, self.body = task_id, body
        self.run_: interrupts.Running | None = None
        self.ended: BaseException | None = None
        self.started_ = threading.Event()

    def run(self) -> None:
        self.run_ = interrupts.begin(self.task_id, 1)
        self.started_.set()
        try:
            self.body(self.run_)
        except BaseException as exc:  # what ended it is the test's finding
            self.ended = exc
        finally:
            interrupts.end()


def _waits_in_agent_code(run) -> None:
    """Agent code that waits as a model stream does: short reads, one after another."""
    with interrupts.region(interrupts.AGENT):
        while True:
            time.sleep(0.01)


def _stop(attempt: _Attempt) -> None:
    interrupts.seen(attempt.task_id, 1, where="notified")
    wait_until(lambda: interrupts.deliver(attempt.run_) or not attempt.is_alive(), timeout=5, message="a delivery")


def test_a_stop_reaches_one_attempt_of_many_and_no_other():
    attempts = [_Attempt(f"task-{i}", _waits_in_agent_code) for i in range(20)]
    for attempt in attempts:
        attempt.start()
        attempt.started_.wait(5)
    stopped, others = attempts[7], attempts[:7] + attempts[8:]

    began = time.monotonic()
    _stop(stopped)
    stopped.join(5)

    assert not stopped.is_alive() and time.monotonic() - began < 1.0
    assert isinstance(stopped.ended, StopRequested)
    assert stopped.ended.task_id == "task-7" and stopped.ended.where == "in agent code"
    time.sleep(0.1)  # the others run on: a stop delivered elsewhere would end one by now
    assert all(a.is_alive() and a.ended is None for a in others)
    for attempt in others:
        _stop(attempt)
        attempt.join(5)
        assert isinstance(attempt.ended, StopRequested) and attempt.ended.task_id == attempt.task_id


def test_a_stop_is_not_delivered_into_steward_code_but_raised_on_the_way_back():
    inside = threading.Event()
    leave = threading.Event()
    reached: list[str] = []

    def body(run):
        with interrupts.region(interrupts.AGENT), interrupts.region(interrupts.STEWARD):
            inside.set()
            while not leave.is_set():  # Steward's own work: a journal write, say
                time.sleep(0.005)
            reached.append("steward work finished")

    attempt = _Attempt("task-s", body)
    attempt.start()
    inside.wait(5)
    interrupts.seen("task-s", 1, where="notified")
    assert interrupts.deliver(attempt.run_) is False  # not while it is in Steward's code
    time.sleep(0.05)
    assert attempt.is_alive()
    leave.set()
    attempt.join(5)
    # It finished its work, then the stop was raised as it returned to agent code.
    assert reached == ["steward work finished"]
    assert isinstance(attempt.ended, StopRequested) and attempt.ended.where == "returning to agent code"


def _steward_work() -> int:
    """Stands for a journal write: a stop raised in here would cut it midway."""
    total = 0
    for i in range(200):
        total += i
    return total


def test_a_delivery_racing_a_move_into_steward_code_never_lands_there():
    """Many trials: the watcher delivers as fast as it can while the attempt keeps moving
    between agent code and Steward's own. Each delivery must land in agent code (or in
    region()'s own bookkeeping at the boundary), never inside Steward's work: a delivery
    decided without the attempt's lock, or whatever the region, fails this in the first
    trials. (The cancel of a still-pending delivery on entering Steward's code is a second
    guard that CPython's timing, raising at the next call, seldom lets a test reach.)"""
    landed_inside = 0
    trials = 200
    for trial in range(trials):

        def body(run):
            while True:
                with interrupts.region(interrupts.AGENT):
                    for _ in range(50):
                        pass
                    with interrupts.region(interrupts.STEWARD):
                        _steward_work()

        attempt = _Attempt(f"race-{trial}", body)
        attempt.start()
        attempt.started_.wait(5)
        interrupts.seen(attempt.task_id, 1, where="notified")
        deadline = time.monotonic() + 5
        while attempt.is_alive() and time.monotonic() < deadline:
            interrupts.deliver(attempt.run_)
        attempt.join(5)
        assert isinstance(attempt.ended, StopRequested)
        tb = attempt.ended.__traceback__
        while tb is not None:
            landed_inside += tb.tb_frame.f_code is _steward_work.__code__
            tb = tb.tb_next
    assert landed_inside == 0
