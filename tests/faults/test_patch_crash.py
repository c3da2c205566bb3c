"""Patch markers across real crashes (issue 23, docs/adr/0037-agent-versions.md): a task
started on the old code is running when the patched code is deployed, in place (the same
version); a new task starts on the patched code. A worker of the patched deploy is
SIGKILLed in the middle of each path (the old path's o2 journaled, or the new path's x1
journaled), and the task is recovered by another worker of the same deploy:

- the old task's journal ran past the patch point without the marker, so every replay
  takes the old path (ctx.patched("x") is False) and it finishes o1, o2, c;
- the new task's journal holds the marker, so every replay takes the new path and it
  finishes x1, x2, c.

Every worker is armed with both points; a point fires once per task across processes
(runtime/faults.py), so the worker that reaches it holds still and is killed, and the
one that recovers the task passes through."""

from __future__ import annotations

import time

import pytest

from runtime import states
from runtime.models import Step, Task
from tests import versions_code as code
from tests.faults.support import armed, attempts_of, markers, sigkill, start_workers, submit, wait_marker, worker_name
from tests.harness import wait_until
from tests.versions_agents import deployed  # registers v.patched here, for the submits

pytestmark = [pytest.mark.integration]

OLD = {"STEWARD_AGENT_MODULES": "tests.versions_patch_old"}  # before the patch
NEW = {"STEWARD_AGENT_MODULES": "tests.versions_patch_new"}  # patched in place, still version 1
SLEEP = 0.5
# Where each task's worker of the patched deploy is killed: in the middle of its path.
KILL_OLD_PATH = "between_steps@o2"
KILL_NEW_PATH = "between_steps@x1"


def _journal(task_id) -> list[tuple[str, str]]:
    return [(s.kind, s.name) for s in Step.objects.filter(task_id=task_id).order_by("seq")]


def test_a_patched_agent_keeps_each_task_on_its_path_across_a_crash_in_the_middle_of_either(live, fleet, tmp_path):
    fleet.supervisors(1)
    # The old deploy starts a task and is killed after its first old step (o1).
    before = fleet.workers(1, env={**OLD, **armed(tmp_path, "between_steps@o1")}, wait=False)
    with deployed("v.patched", ("1", code.patched_before)):
        old = submit("v.patched", {"sleep": SLEEP}).task_id
    _, held = wait_marker(tmp_path, old, "between_steps@o1", timeout=60)
    assert held["pid"] == before[0].pid
    sigkill(fleet, held["pid"])
    assert _journal(old) == [("step", "a"), ("step", "o1")]

    # The patched deploy: workers armed in the middle of either path, and a new task.
    env = {**NEW, **armed(tmp_path, KILL_OLD_PATH, KILL_NEW_PATH)}
    start_workers(fleet, 2, env=env)
    with deployed("v.patched", ("1", code.patched_after)):
        new = submit("v.patched", {"sleep": SLEEP}).task_id
    killed: dict[tuple[str, str], int] = {}  # (task, point) -> the pid killed there

    def progress():
        fresh = [
            d
            for d in markers(tmp_path).values()
            if d["point"] == "between_steps" and (d["task"], d["step"]) not in killed and d["step"] in ("o2", "x1")
        ]
        done = Task.objects.filter(id__in=[old, new], status__in=states.TERMINAL).count() == 2
        return fresh or done

    deadline = time.monotonic() + 120
    while True:
        fresh = wait_until(progress, timeout=max(deadline - time.monotonic(), 0.1), message="the kills or the end")
        if fresh is True:
            break
        for data in fresh:
            sigkill(fleet, data["pid"])
            killed[(data["task"], data["step"])] = data["pid"]
        start_workers(fleet, len(fresh), env=env)  # each killed worker is replaced, armed too

    # Each was killed in the middle of its own path, on the patched code.
    assert set(killed) == {(str(old), "o2"), (str(new), "x1")}
    old_task, new_task = Task.objects.get(id=old), Task.objects.get(id=new)
    assert old_task.status == new_task.status == states.COMPLETED
    assert old_task.output == {"path": "old", "steps": ["a", "o1", "o2", "c"]}
    assert new_task.output == {"path": "new", "steps": ["a", "x1", "x2", "c"]}
    # The marker is in the new task's journal only, where it was first run.
    assert ("patch", "patch:x") in _journal(new) and _journal(new)[:2] == [("step", "a"), ("patch", "patch:x")]
    assert "patch:x" not in [name for _, name in _journal(old)]
    # Killed on the old code (epoch 1), then on the patched code, then recovered.
    old_attempts, new_attempts = attempts_of(old), attempts_of(new)
    assert [a[2] for a in old_attempts[:2]] == ["lease_expired", "lease_expired"] and len(old_attempts) >= 3
    assert new_attempts[0][2] == "lease_expired" and new_attempts[-1][2] == "complete"
    assert old_task.attempts.filter(epoch=2, worker=worker_name(killed[(str(old), "o2")])).exists()
