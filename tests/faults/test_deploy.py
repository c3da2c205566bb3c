"""A deploy while tasks sleep, with real worker processes (docs/adr/0037-agent-versions.md):
the new deploy reorders the agent's steps, and no task fails. Old tasks wait, visibly,
while no worker serves their version, and finish on it once one is back; new tasks run
the new version on the new workers meanwhile.

N is small in `make test`; the issue's 50 run under the stress marker."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.models import Attempt, Task
from runtime.tasks.selectors import task_waits_for_version
from tests import versions_code as code
from tests.faults.support import submit
from tests.harness import wait_until
from tests.versions_agents import deployed

pytestmark = [pytest.mark.integration]

OLD = {"STEWARD_AGENT_MODULES": "tests.versions_old"}  # a worker of the old deploy: v.reorder 1 only
NEW = {"STEWARD_AGENT_MODULES": "tests.versions_new"}  # the new deploy: v.reorder 2 only
SLEEP = 3.0  # long enough for the old worker to be gone before the old tasks wake


def _statuses(ids) -> dict[str, int]:
    found: dict[str, int] = {}
    for status in Task.objects.filter(id__in=ids).values_list("status", flat=True):
        found[status] = found.get(status, 0) + 1
    return found


def _deploy_while_tasks_sleep(fleet, n: int) -> tuple[list, list]:
    """Deploy a reordered agent while `n` tasks sleep; the ids of the old and new tasks."""
    fleet.supervisors(1)
    old_worker = fleet.workers(1, env=OLD)[0]
    with deployed("v.reorder", ("1", code.reorder_v1)):  # submitted before the deploy
        old = [submit("v.reorder", {"sleep": SLEEP}).task_id for _ in range(n)]
    wait_until(lambda: _statuses(old) == {states.SLEEPING: n}, timeout=60, message="the old tasks to sleep")

    # The deploy: the old worker goes, two workers of the new version come.
    old_worker.kill()
    fleet.workers(2, env=NEW)
    with deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)):
        new = [submit("v.reorder", {"sleep": 0.2}).task_id for _ in range(n)]
    wait_until(lambda: _statuses(new) == {states.COMPLETED: n}, timeout=120, message="the new tasks to finish")
    # The old tasks woke, and wait: queued, no step of theirs run on the new code.
    wait_until(lambda: _statuses(old) == {states.QUEUED: n}, timeout=60, message="the old tasks to wake and wait")
    assert {task_waits_for_version(t) for t in Task.objects.filter(id__in=old)} == {"1"}
    assert not Attempt.objects.filter(task_id__in=old, epoch__gt=1).exists()  # not one claimed by a new worker

    # The old version is served again by one worker: they finish on it.
    fleet.workers(1, env=OLD)
    wait_until(lambda: _statuses(old) == {states.COMPLETED: n}, timeout=120, message="the old tasks to finish")
    return old, new


def _ran_on(ids) -> set:
    return {t.output["version"] for t in Task.objects.filter(id__in=ids)}


def test_a_deploy_that_reorders_steps_while_tasks_sleep_fails_no_task(live, fleet):
    old, new = _deploy_while_tasks_sleep(fleet, 8)

    assert (_ran_on(old), _ran_on(new)) == ({"1"}, {"2"})
    assert not Task.objects.filter(id__in=old + new, status=states.FAILED).exists()  # 0 tasks failed


@pytest.mark.stress
def test_a_deploy_while_fifty_tasks_sleep_fails_none_of_them(live, fleet):
    old, new = _deploy_while_tasks_sleep(fleet, 50)

    assert (_ran_on(old), _ran_on(new)) == ({"1"}, {"2"})
    assert not Task.objects.filter(id__in=old + new, status=states.FAILED).exists()
