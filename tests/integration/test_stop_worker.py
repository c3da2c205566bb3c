"""The worker boundary of a stop, with real worker processes (runtime/worker/stop_watch.py).

A stop reaches a step blocked in a long call at once, not at its next write; a step that
swallows it still ends at the next boundary; a step that ignores it is ended by force
after the grace, and the pool goes on working; a frozen worker never answers, and the
stop finishes at its bound without it, while its late writes are refused.

t.stoppable (tests/agents.py) runs `first`, then `block` (which blocks as the test asks),
then `next`; each marks a file in the test's directory as it starts, so the tests wait
for files and can show that `next` never started.
"""

from __future__ import annotations

import os
import signal

import pytest

from runtime import states
from runtime.models import Attempt, AuditEvent, Step, Stop, StopAck, Task
from runtime.stops.services import task_stop
from tests.faults.support import armed, held_slots, release, submit, wait_marker, wait_nothing_held
from tests.harness import wait_until
from tests.stops import acks, cancelled, missing_at_cancel, since_stop, sweeping

# serial: its bounds are wall-clock times (a stop acknowledged within 1 s, pyproject.toml);
# under a second xdist worker's load an acknowledgment by lease renewal once took 1.21 s.
pytestmark = [pytest.mark.integration, pytest.mark.serial]

ACTOR = "user:alice"


def _wait_file(path, timeout: float = 30.0) -> str:
    return wait_until(lambda: path.exists() and path.read_text(), timeout=timeout, message=f"{path.name} marked")


def _figures(task: Task, ack: StopAck) -> tuple[float, float]:
    """Seconds from the stop request to the worker's acknowledgment, and to cancelled."""
    return since_stop(task, ack.at), since_stop(task, task.finished_at)


@pytest.mark.parametrize("via", ["sleep", "http"])
def test_a_step_blocked_in_a_long_call_is_interrupted_by_the_stop(live, fleet, fake, tmp_path, via):
    fleet.workers(1)
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "block", "via": via, "url": fake.url}).task_id
    _wait_file(tmp_path / "block")

    task_stop(task_id=task_id, actor=ACTOR, reason="interrupt the long call")
    task = cancelled(task_id, timeout=5)

    answered = acks(task_id)
    assert set(answered) == set(states.STOP_BOUNDARIES)
    worker = answered[states.WORKER]
    assert (worker.detail["ended"], worker.detail["at"]) == ("cleanly", "in agent code")
    assert worker.detail["seen"] in ("notified", "lease renewal")
    to_ack, to_cancelled = _figures(task, worker)
    print(f"\nstop -> worker ack {to_ack * 1000:.0f} ms, -> cancelled {to_cancelled * 1000:.0f} ms ({via})")
    assert to_ack < 1.0 and to_cancelled < 1.0
    # The step never finished and the next one never started: the attempt ended first.
    assert list(Step.objects.filter(task_id=task_id).values_list("name", flat=True)) == ["first"]
    assert not (tmp_path / "next").exists()
    (attempt,) = Attempt.objects.filter(task_id=task_id)
    assert attempt.end_reason == "stopped" and attempt.ended_at <= task.finished_at
    assert task.status_note == "cancelled: every boundary acknowledged"
    wait_nothing_held()


def test_a_worker_that_cannot_listen_sees_the_stop_at_its_next_lease_renewal(live, fleet, tmp_path):
    """Its stop watcher is held before LISTEN (as while it reconnects after a database
    loss): the lease keeper's renewal reads the task's status and delivers the stop."""
    (tmp_path / "faults").mkdir()
    fleet.workers(1, env=armed(tmp_path / "faults", "before_stop_listen@listen"))
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "block"}).task_id
    _wait_file(tmp_path / "block")
    wait_marker(tmp_path / "faults", "worker", "before_stop_listen@listen")

    task_stop(task_id=task_id, actor=ACTOR, reason="no notification reaches it")
    task = cancelled(task_id, timeout=5)

    worker = acks(task_id)[states.WORKER]
    assert (worker.detail["ended"], worker.detail["seen"]) == ("cleanly", "lease renewal")
    to_ack, _ = _figures(task, worker)
    print(f"\nno LISTEN: stop -> worker ack {to_ack * 1000:.0f} ms (heartbeat 300 ms)")
    assert to_ack < 1.0
    assert not (tmp_path / "next").exists()


def test_an_absorbed_stop_still_ends_at_the_next_boundary(live, fleet, tmp_path):
    fleet.workers(1)
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "absorb"}).task_id
    _wait_file(tmp_path / "block")

    task_stop(task_id=task_id, actor=ACTOR, reason="the step swallows it")
    task = cancelled(task_id, timeout=5)

    assert (tmp_path / "absorbed").exists(), "the step caught the stop and returned normally"
    worker = acks(task_id)[states.WORKER]
    assert worker.detail["ended"] == "cleanly"
    # Its return value is not journaled, and the next step never starts.
    assert list(Step.objects.filter(task_id=task_id).values_list("name", flat=True)) == ["first"]
    assert not (tmp_path / "next").exists()
    assert task.output is None and task.status_note == "cancelled: every boundary acknowledged"
    wait_nothing_held()


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_step_that_ignores_the_stop_is_ended_by_force_after_the_grace(live, fleet, tmp_path, pool):
    """solo (docs/deploy.md): the forced process exits and the fleet's other worker runs
    the next task; prefork: Celery's master replaces its child, which runs it."""
    grace = {"STEWARD_STOP_GRACE_SECONDS": "1"}
    workers = fleet.workers(2 if pool == "solo" else 1, pool=pool, env=grace)
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "ignore"}).task_id
    runner = int(_wait_file(tmp_path / "block"))
    if pool == "prefork":
        assert runner != workers[0].pid  # a child of the master runs it

    task_stop(task_id=task_id, actor=ACTOR, reason="the step ignores it")
    task = cancelled(task_id, timeout=10)

    ack = acks(task_id)[states.WORKER]
    assert ack.detail["ended"] == "by force"
    assert 1.0 <= ack.detail["after_seconds"] < 2.0
    to_ack, to_cancelled = _figures(task, ack)
    print(f"\nforced ({pool}): stop -> worker ack {to_ack * 1000:.0f} ms, -> cancelled {to_cancelled * 1000:.0f} ms")
    (attempt,) = Attempt.objects.filter(task_id=task_id)
    assert attempt.end_reason == "forced"
    assert held_slots() == []  # released with the acknowledgment
    wait_until(lambda: not psutil_alive(runner), timeout=10, message="the forced process to be gone")
    if pool == "solo":
        (forced,) = [w for w in workers if w.pid == runner]
        assert forced.popen.wait(10) == 70  # it ended itself: EX_SOFTWARE, as billiard's forced exits
    assert not (tmp_path / "next").exists()

    # The pool goes on: the next task completes.
    after = submit("t.steps", {"n": 1}).task_id
    done = wait_until(
        lambda: Task.objects.filter(id=after, status=states.COMPLETED).first(),
        timeout=30,
        message="the next task to complete",
    )
    assert done.output["pid"] != runner
    assert all(w.alive() for w in workers if w.pid != runner)
    wait_nothing_held()


def psutil_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_hung_worker_never_acknowledges_and_the_stop_finishes_at_its_bound(live, fleet, tmp_path):
    sweeping(fleet)
    point = "before_step_journal@first"
    (frozen,) = fleet.workers(1, env=armed(tmp_path, point), wait=False)
    task_id = submit("t.stoppable", {"dir": str(tmp_path), "how": "block"}).task_id
    marker, held = wait_marker(tmp_path, task_id, point)
    assert held["pid"] == frozen.pid
    os.kill(frozen.pid, signal.SIGSTOP)  # the worker, its lease keeper and its stop watcher stop together
    try:
        started = task_stop(task_id=task_id, actor=ACTOR, reason="the worker hangs", bound_seconds=0.5)
        assert started.stopping == [task_id]
        task = cancelled(task_id, timeout=10)
        stop = Stop.objects.get(id=task.stop_id)
        bounded = since_stop(task, task.finished_at)
        print(f"\nhung worker: stop -> cancelled at its bound in {bounded * 1000:.0f} ms (bound 500 ms)")
        assert 0.45 <= bounded < 2.0  # requested_at: the insert's statement time; the deadline: its transaction's
        assert missing_at_cancel(task_id) == (False, ["worker"])
        assert task.status_note == "cancelled: the stop's bound passed; see its stop summary"
        assert stop.outcome == "bounded" or Stop.objects.get(id=stop.id).outcome == "bounded"
        # No worker acknowledged before the bound (a later one, the supervisor's "lease
        # lapsed" once the frozen worker's lease ran out, comes after the cancellation).
        worker_ack = acks(task_id).get(states.WORKER)
        assert worker_ack is None or worker_ack.at > task.finished_at
    finally:
        release(marker)
        os.kill(frozen.pid, signal.SIGCONT)

    # Thawed, it tries the journal write it froze before: refused, and nothing changes.
    refused = wait_until(
        lambda: AuditEvent.objects.filter(task_id=task_id, kind="write.refused").first(),
        timeout=20,
        message="the thawed worker's refused write",
    )
    assert refused.data == {"boundary": "storage", "write": "journal", "epoch": 1}
    frozen.wait_ready(timeout=20)
    after = Task.objects.get(id=task_id)
    assert (after.status, after.finished_at, after.output) == (states.CANCELLED, task.finished_at, None)
    assert not Step.objects.filter(task_id=task_id).exists()
    assert not (tmp_path / "block").exists() and not (tmp_path / "next").exists()
    wait_nothing_held()
