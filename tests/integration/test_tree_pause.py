"""A fan-out trip pauses the whole tree on real worker processes (runtime/limits/pauses.py):
siblings running on other workers finish the step they are in and stop before the next
(the pause reaches them through the stop watcher's LISTEN); the tree then holds no
worker and no slot, outlives every process, and an operator's resume of the tripped
task with a raised limit finishes it with no step run twice.

The tree is tests/tree_agents.py's t.grove: two t.sapling children taking paced steps,
each step appending its number to a file when it runs, and a t.bramble that trips
max_children 1 while the saplings are mid-way."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import states
from runtime.models import Attempt, Slot, Step, Task, TreePause
from runtime.tasks.services import task_resume, task_submit
from tests.harness import wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def fleet(shared_fleet):
    """Warm workers, lent to each test in turn (tests/harness.py WarmFleet)."""
    return shared_fleet


ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
STEPS = 60
PACE = 0.05


def grove(tmp_path: Path):
    root = task_submit(
        agent="t.grove",
        input={"saplings": 2, "steps": STEPS, "pace": PACE, "dir": str(tmp_path), "bramble_after": 0.6},
        **ALICE,
    ).task_id
    pause = wait_until(lambda: TreePause.objects.filter(root_id=root).first(), message="the bramble to trip")
    tree = Task.objects.filter(root_id=root)
    wait_until(
        lambda: not tree.filter(status=states.RUNNING).exists(),
        timeout=10,
        message="every running task of the tree to pause",
    )
    return root, pause


def marks(tmp_path: Path, name: str) -> list[int]:
    path = tmp_path / name
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def test_running_siblings_on_other_workers_pause_before_their_next_step(live, fleet, tmp_path):
    fleet.workers(4)
    fleet.supervisors(1)
    root, pause = grove(tmp_path)

    bramble = Task.objects.get(root_id=root, agent="t.bramble")
    assert (bramble.status, bramble.blocked_reason, bramble.breaker) == (
        states.BLOCKED,
        states.BREAKER_TRIPPED,
        states.FANOUT_CHILDREN,
    )
    held = Task.objects.filter(root_id=root, agent__in=("t.grove", "t.sapling"))
    assert set(held.values_list("status", "blocked_reason")) == {(states.BLOCKED, states.TREE_PAUSED)}
    # The bramble's first child ran on the spare worker before the pause, or was held by it.
    [child] = Task.objects.filter(parent_id=bramble.id)
    assert (child.status, child.blocked_reason) in {(states.COMPLETED, None), (states.BLOCKED, states.TREE_PAUSED)}
    assert not Slot.objects.filter(task__root_id=root).exists()
    assert not Attempt.objects.filter(task__root_id=root, ended_at__isnull=True).exists()

    for sapling in Task.objects.filter(root_id=root, agent="t.sapling"):
        steps = Step.objects.filter(task_id=sapling.id)
        # Mid-way, not finished. After the pause committed, the step in flight ended, and
        # steps began only until the worker's watcher was told: none after the attempt
        # ended, and no more than that delay holds at one step per PACE (one, on a quiet
        # machine; CI at load 13 once saw two, 0.1 s late).
        assert 0 < steps.count() < STEPS
        late = (
            steps.filter(finished_at__gt=pause.paused_at).count(),
            steps.filter(started_at__gt=pause.paused_at).count(),
        )
        ended = Attempt.objects.get(task_id=sapling.id)
        assert ended.end_reason == "pause"
        after = (ended.ended_at - pause.paused_at).total_seconds()
        assert not steps.filter(started_at__gt=ended.ended_at).exists()
        assert late[0] <= late[1] + 1 and late[1] <= 1 + after / PACE, (late, after)
        print(
            f"\n{sapling.id} paused {after * 1000:.0f} ms after the pause, after {steps.count()} steps "
            f"({late[0]} ended and {late[1]} began after it)"
        )
        assert after < PACE + 2.0  # the step in flight, then the notification's round
        assert marks(tmp_path, sapling.input["name"]) == list(range(steps.count()))


def test_after_every_process_restarts_a_resume_lifts_the_pause_and_no_step_runs_twice(live, fleet, tmp_path):
    old = fleet.workers(4) + fleet.supervisors(1)
    root, pause = grove(tmp_path)
    for process in old:
        process.kill()  # SIGKILL: only PostgreSQL remembers the pause
    fleet.workers(2)
    fleet.supervisors(1)
    bramble = Task.objects.get(root_id=root, agent="t.bramble")

    resumed = task_resume(
        task_id=bramble.id, actor="user:alice", note="two children are fine", limits={"max_children": 2}
    )

    assert resumed.pause_id == pause.id
    done = wait_until(
        lambda: Task.objects.filter(id=root, status__in=states.TERMINAL).first(),
        timeout=60,
        message="the tree to finish",
    )
    assert done.status == states.COMPLETED, done.error
    assert done.output == {"statuses": [states.COMPLETED] * 3}
    for sapling in Task.objects.filter(root_id=root, agent="t.sapling"):
        assert marks(tmp_path, sapling.input["name"]) == list(range(STEPS)), "every step ran exactly once"
        assert [(a.reason, a.end_reason) for a in Attempt.objects.filter(task_id=sapling.id).order_by("epoch")] == [
            ("first", "pause"),
            ("resume", "complete"),
        ]
    pause.refresh_from_db()
    assert (pause.released_by, pause.released_at is not None) == ("user:alice", True)
