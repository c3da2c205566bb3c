"""Versions under races, released together by a barrier, each racer on its own database
connection (docs/adr/0037-agent-versions.md), counted over many trials:

- an upgrade against the first claim (the one that fixes the version) by a worker of the
  old version: either the upgrade wins and the old worker claims nothing, or the claim
  wins and the upgrade is UPGRADE_RACED (the claim came during its dry replay) or
  TASK_NOT_UPGRADABLE (before it read the task); never a task upgraded and run on the old
  version, never one lost;
- a retire against a submit and the first claim of a task by a worker whose current
  version it is: either the retire wins and the claim takes nothing (the task waits, no
  version fixed), or the claim wins and the retire is VERSION_IN_USE; never a task on a
  retired version.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from runtime import states
from runtime.attempts.lease import claim_next
from runtime.errors import TaskNotUpgradable, UpgradeRaced, VersionInUse
from runtime.limits.services import default_pool_name
from runtime.models import RetiredVersion, Slot, Task
from runtime.tasks.services import task_submit
from runtime.versions.services import task_upgrade, version_retire
from tests import versions_code as code
from tests.harness import race
from tests.versions_agents import deployed

pytestmark = pytest.mark.usefixtures("transactional_db")

TRIALS = [pytest.param(20, id="20-trials"), pytest.param(200, id="200-trials", marks=pytest.mark.stress)]
ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
OLD_WORKER = (["v.reorder"], ["1"])  # what a worker of the old deploy serves


def out_of_the_way(task_id) -> None:
    """End the trial's task, so the next trial claims its own and has a slot to."""
    Slot.objects.filter(task_id=task_id).update(task=None, epoch=None, taken_at=None)
    Task.objects.filter(id=task_id).update(status=states.CANCELLED)


def _name(result) -> str:
    if isinstance(result, BaseException):
        return getattr(result, "code", type(result).__name__)
    return "ok" if result is not None else "none"


@pytest.mark.parametrize("trials", TRIALS)
def test_an_upgrade_racing_a_claim_by_an_old_worker_never_runs_a_task_on_the_wrong_version(trials):
    outcomes = Counter()
    with deployed("v.reorder", ("1", code.reorder_v1), ("3", code.reorder_v3)):
        for trial in range(trials):
            with deployed("v.reorder", ("1", code.reorder_v1)):
                task_id = task_submit(agent="v.reorder", input={"trial": trial}, **ALICE).task_id

            def racer(i, task_id=task_id, trial=trial):
                if i == 0:
                    return task_upgrade(task_id=task_id, tenant="acme", version="3", actor="user:alice")
                # The dry replay takes longer than a claim: delayed by 0-60 ms across trials,
                # the claim lands before, during and after the upgrade's write.
                time.sleep((trial % 4) * 0.02)
                return claim_next(pool=default_pool_name(), worker="old", served=OLD_WORKER)

            upgraded, claimed = race(2, racer)
            task = Task.objects.get(id=task_id)
            outcome = (_name(upgraded), _name(claimed))
            outcomes[outcome] += 1
            if isinstance(upgraded, UpgradeRaced | TaskNotUpgradable):
                # The claim won (during the dry replay, or before the upgrade read the task):
                # the task runs on the version it was claimed on, unchanged.
                assert claimed is not None and claimed.version == "1" and task.agent_version == "1"
                assert task.status == states.RUNNING
            else:
                assert not isinstance(upgraded, BaseException), upgraded
                # The upgrade won: the old worker passed it over; it waits for version 3.
                assert claimed is None and task.agent_version == "3" and task.status == states.QUEUED
            out_of_the_way(task_id)
    assert sum(outcomes.values()) == trials
    assert set(outcomes) <= {("ok", "none"), ("UPGRADE_RACED", "ok"), ("TASK_NOT_UPGRADABLE", "ok")}, outcomes
    print(f"upgrade vs claim over {trials} trials: {dict(outcomes)}")


@pytest.mark.parametrize("trials", TRIALS)
def test_a_retire_racing_a_submit_and_its_first_claim_never_leaves_a_task_on_a_retired_version(trials):
    outcomes = Counter()
    with deployed("v.reorder", ("1", code.reorder_v1)):
        for trial in range(trials):

            def racer(i, trial=trial):
                if i == 0:
                    # 0-30 ms across trials: the retire lands before the submit, between
                    # the submit and the claim, during the claim and after it.
                    time.sleep((trial % 4) * 0.01)
                    return version_retire(agent="v.reorder", version="1", actor="user:alice")
                submitted = task_submit(agent="v.reorder", input={"trial": trial}, **ALICE)
                return submitted.task_id, claim_next(pool=default_pool_name(), worker="old", served=OLD_WORKER)

            retired, (task_id, claimed) = race(2, racer)
            outcomes[(_name(retired), _name(claimed))] += 1
            on_retired = RetiredVersion.objects.filter(agent="v.reorder", version="1").exists()
            task = Task.objects.get(id=task_id)  # never lost
            if isinstance(retired, VersionInUse):
                # The claim won: the task started on 1, which stays unretired.
                assert not on_retired and claimed is not None and claimed.version == "1"
                assert (task.status, task.agent_version) == (states.RUNNING, "1")
            else:
                # The retire won: the worker of 1 did not start it; it waits, no version fixed.
                assert retired is True and on_retired and claimed is None, (retired, claimed)
                assert (task.status, task.agent_version) == (states.QUEUED, None)
            live = Task.objects.filter(agent="v.reorder", agent_version="1").exclude(status__in=states.TERMINAL)
            assert not (on_retired and live.exists())
            out_of_the_way(task_id)
            RetiredVersion.objects.filter(agent="v.reorder", version="1").delete()  # for the next trial
    assert sum(outcomes.values()) == trials
    assert set(outcomes) <= {("ok", "none"), ("VERSION_IN_USE", "ok")}, outcomes
    print(f"retire vs first claim over {trials} trials: {dict(outcomes)}")
