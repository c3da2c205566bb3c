"""Isolated agents with real worker and supervisor processes, each test run twice: with the
agent in the worker's process and in its sandbox (isolation in (None, "process")).

- A worker killed (SIGKILL) mid-attempt, after an irreversible effect committed: the
  supervisor recovers the task, the next attempt (a new sandbox on another worker)
  replays the journal and the effect's receipt, and the effect is never run again.
- A stop reaches a step running in the sandbox: the attempt ends, its sandbox is killed,
  and every boundary acknowledges.
- Every worker restarted while a task waits for approval: the approval resumes it once.

The agents are tests/isolated_agents.py's, registered both ways.
"""

from __future__ import annotations

import os

import pytest

from runtime import states
from runtime.approvals.services import approval_decide
from runtime.models import Approval, Attempt, Effect, Step, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import task_submit
from tests.faults.support import wait_nothing_held
from tests.harness import wait_until
from tests.isolated_agents import named
from tests.stops import acks, cancelled

pytestmark = [pytest.mark.integration]

MODES = [pytest.param(None, id="in-process"), pytest.param("process", id="isolated")]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet); the ones a
    test kills are not lent again."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}


def _finished(task_id) -> Task:
    return wait_until(
        lambda: Task.objects.filter(id=task_id, status__in=states.TERMINAL).first(), message="the task to finish"
    )


def _sandboxes_of(pid: int) -> list[int]:
    """The bwrap processes a worker started (its children running /usr/bin/bwrap)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().split(b"\0")[0]
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and command.endswith(b"bwrap"):
            found.append(int(entry))
    return found


@pytest.mark.parametrize("isolation", MODES)
def test_a_worker_killed_mid_attempt_is_recovered_by_replay_without_repeating_the_effect(live, fleet, isolation):
    (first,) = fleet.workers(1)
    fleet.supervisors(1)
    task_id = task_submit(agent=named("iso.crash", isolation), input={}, **ALICE).task_id
    # The effect committed and the attempt is inside `hold`, which never returns on epoch 1.
    effect = wait_until(
        lambda: Effect.objects.filter(task_id=task_id, state=states.COMMITTED).first(),
        message="the effect to commit",
    )
    if isolation:
        assert _sandboxes_of(first.pid), "the attempt runs in a sandbox the worker started"
    first.kill()
    fleet.workers(1)

    task = _finished(task_id)
    assert task.status == states.COMPLETED, task.error
    assert task.output["epoch"] == 2
    # The second attempt got the first one's receipt: the effect's function did not run again.
    assert task.output["sent"] == effect.receipt
    assert Effect.objects.filter(task_id=task_id).count() == 1
    assert [(a.epoch, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")][-1] == (
        2,
        "complete",
    )
    names = list(Step.objects.filter(task_id=task_id).order_by("seq").values_list("seq", "name"))
    assert names == [(0, "prepare"), (1, "send"), (2, "hold")]


@pytest.mark.parametrize("isolation", MODES)
@pytest.mark.parametrize("attempts", [1, 4], ids=["solo", "dense"])
def test_a_stop_reaches_a_running_step_and_every_boundary_acknowledges(live, fleet, isolation, attempts):
    """Solo: the stop arrives as a signal to the main thread; dense (runtime/worker/dense.py):
    as an exception raised in the attempt's thread, between two of the harness's selects."""
    dense = {"STEWARD_WORKER_ATTEMPTS": str(attempts), "STEWARD_DB_POOL_MAX": "3", "STEWARD_DB_POOL_TIMEOUT": "30"}
    (worker,) = fleet.workers(1, env=dense if attempts > 1 else None)
    task_id = task_submit(agent=named("iso.spin", isolation), input={}, **ALICE).task_id
    wait_until(lambda: Step.objects.filter(task_id=task_id, name="begin").exists(), message="the first step")

    task_stop(task_id=task_id, actor="user:alice", reason="stop the spinning step")
    cancelled(task_id, timeout=10)

    answered = acks(task_id)
    assert set(answered) == set(states.STOP_BOUNDARIES)
    assert answered[states.WORKER].detail["ended"] == "cleanly"
    assert list(Step.objects.filter(task_id=task_id).values_list("name", flat=True)) == ["begin"]
    (attempt,) = Attempt.objects.filter(task_id=task_id)
    assert attempt.end_reason == "stopped"
    wait_nothing_held()
    # The sandbox went with the attempt; the worker lives on.
    wait_until(lambda: not _sandboxes_of(worker.pid), message="the sandbox to be gone")
    assert worker.alive()


@pytest.mark.parametrize("isolation", MODES)
def test_every_worker_restarted_during_an_approval_then_it_resumes_exactly_once(live, fleet, isolation):
    old = fleet.workers(2) + fleet.supervisors(1)
    task_id = task_submit(agent=named("iso.approve", isolation), input={"amount": 3}, **ALICE).task_id
    wait_until(
        lambda: Task.objects.filter(id=task_id, status=states.BLOCKED, blocked_reason=states.APPROVAL_PENDING).exists(),
        message="the task to wait for approval",
    )
    assert not Attempt.objects.filter(task_id=task_id, ended_at__isnull=True).exists()
    for process in old:
        process.kill()
    fleet.workers(2)
    fleet.supervisors(1)
    approval = Approval.objects.get(task_id=task_id, state=states.PENDING)
    approval_decide(approval_id=approval.id, tenant="acme", actor="user:dave", decision="approve", comment="go")

    task = _finished(task_id)
    assert task.status == states.COMPLETED, task.error
    assert task.output["state"] == states.CONSUMED
    assert Effect.objects.filter(task_id=task_id, state=states.COMMITTED).count() == 1
    assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=task_id).order_by("epoch")] == [
        ("first", "await"),
        ("resume", "complete"),
    ]
