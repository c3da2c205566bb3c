"""Agent versions, patch markers and upgrades, in-process (docs/adr/0037-agent-versions.md):
a task runs the version it started on (its first claim fixes it, whatever the submitting
process had), a worker claims only what it serves, a
task nobody serves waits visibly, ctx.patched() keeps old tasks on their old path across
crashes, and an upgrade moves a task only when its journal replays on the new code.
tests/faults/test_deploy.py does the same with real worker processes."""

from __future__ import annotations

import pytest

from runtime import agents, states
from runtime.attempts.lease import claim_next
from runtime.errors import (
    TaskNotUpgradable,
    UpgradeDoesNotReplay,
    VersionInUse,
    VersionNotServed,
)
from runtime.fleet.services import process_beat, process_stopped
from runtime.limits.services import default_pool_name
from runtime.models import AuditEvent, Task
from runtime.tasks.selectors import ANY_VERSION, task_detail
from runtime.testing import StewardTestEnv
from runtime.versions.selectors import patch_holdouts, version_overview
from runtime.versions.services import task_upgrade, version_retire, version_upgrade
from tests import versions_code as code
from tests.versions_agents import deployed  # also registers v.reorder and v.patched here

pytestmark = pytest.mark.django_db(transaction=True)
HOUR = 3600


@pytest.fixture
def env():
    with StewardTestEnv() as steward:
        yield steward


def _version(task_id) -> str:
    return Task.objects.get(id=task_id).agent_version


def test_a_declared_version_is_recorded_and_an_undeclared_one_is_a_digest_of_the_module():
    assert agents.get("v.reorder").version == "2"  # the last registered is current
    assert agents.get("v.reorder", "1").fn is code.reorder_v1
    assert agents.get("t.steps").version.startswith("h-")  # tests/agents.py declares none
    with pytest.raises(ValueError, match="version"):
        agents.agent("v.bad", version="has space")


def test_old_tasks_finish_on_the_old_version_and_new_tasks_run_the_new_one(env):
    with deployed("v.reorder", ("1", code.reorder_v1)):
        old = env.submit("v.reorder", {"sleep": HOUR})
        env.run_until_idle()
    assert (env.result(old).status, _version(old)) == (states.SLEEPING, "1")
    # The deploy: version 2 (its steps reordered) is current; version 1 is still served.
    with deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)):
        new = env.submit("v.reorder", {"sleep": HOUR})
        env.run_until_idle()
        env.advance(2 * HOUR)
        env.run_until_idle()
    assert env.result(old).output == {"version": "1", "order": ["a", "b"]}
    assert env.result(new).output == {"version": "2", "order": ["b", "a"]}
    assert _version(new) == "2"


def test_a_task_whose_version_no_worker_serves_waits_visibly_and_runs_when_one_is_back(env):
    with deployed("v.reorder", ("1", code.reorder_v1)):
        old = env.submit("v.reorder", {"sleep": HOUR})
        env.run_until_idle()
    with deployed("v.reorder", ("2", code.reorder_v2)):  # the old worker is gone
        process_beat(kind="worker", totals={}, fresh={}, waits=[])
        env.advance(2 * HOUR)
        env.run_until_idle()
        task = env.result(old)
        assert task.status == states.QUEUED  # woken, but not claimed: it does not fail
        assert task_detail(old).waiting_for_version == "1"
        assert [r.name for r in env.journal(old)] == ["a", "sleep"]
        waiting = {(r.agent, r.version): r for r in version_overview(tenant="acme", agent="v.reorder")}
        assert waiting[("v.reorder", "1")].waiting and waiting[("v.reorder", "1")].tasks == {"queued": 1}
    with deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)):  # it is back
        process_beat(kind="worker", totals={}, fresh={}, waits=[])
        assert task_detail(old).waiting_for_version is None
        env.run_until_idle()
    assert env.result(old).output == {"version": "1", "order": ["a", "b"]}
    process_stopped(kind="worker")


# --- patch markers ---------------------------------------------------------------------------


@pytest.mark.parametrize("crash_on", ["o2", "x2"])
def test_a_patch_keeps_old_tasks_on_the_old_path_and_new_ones_on_the_new_across_crashes(env, crash_on):
    with deployed("v.patched", ("1", code.patched_before)):
        old = env.submit("v.patched", {"sleep": HOUR})
        env.crash_at("between_steps", step="o1")  # the old code dies after its first old step
        env.run_until_idle()
    assert [r.name for r in env.journal(old)] == ["a", "o1"]
    # The deploy keeps version 1 and patches it: the same tasks run the new code.
    with deployed("v.patched", ("1", code.patched_after)):
        new = env.submit("v.patched", {"sleep": HOUR})
        env.crash_at("between_steps", step=crash_on)  # in the middle of one path or the other
        env.expire_leases()
        env.run_until_idle()
        env.expire_leases()
        env.run_until_idle()
        env.advance(2 * HOUR)
        env.run_until_idle()
    assert env.result(old).output == {"path": "old", "steps": ["a", "o1", "o2", "c"]}
    assert env.result(new).output == {"path": "new", "steps": ["a", "x1", "x2", "c"]}
    assert [(r.kind, r.name) for r in env.journal(new)][:2] == [("step", "a"), ("patch", "patch:x")]
    assert "patch:x" not in [r.name for r in env.journal(old)]


def test_a_deprecated_patch_steps_over_its_marker_and_journals_nothing_new(env):
    with deployed("v.patched", ("1", code.patched_after)):
        marked = env.submit("v.patched", {"sleep": HOUR})
        env.run_until_idle()
        assert patch_holdouts(tenant="acme", agent="v.patched", name="x") == {"marked": 1, "unmarked": 0}
    with deployed("v.patched", ("1", code.patched_deprecated)):
        fresh = env.submit("v.patched", {"sleep": HOUR})
        env.advance(2 * HOUR)
        env.run_until_idle()
        env.advance(2 * HOUR)
        env.run_until_idle()
    assert env.result(marked).output == {"path": "new", "steps": ["a", "x1", "x2", "c"]}
    assert env.result(fresh).output == {"path": "new", "steps": ["a", "x1", "x2", "c"]}
    assert "patch:x" not in [r.name for r in env.journal(fresh)]


# --- upgrades --------------------------------------------------------------------------------


def _sleeping_on_v1(env):
    with deployed("v.reorder", ("1", code.reorder_v1)):
        task = env.submit("v.reorder", {"sleep": HOUR})
        env.run_until_idle()
    assert env.result(task).status == states.SLEEPING
    return task


def test_an_upgrade_that_does_not_replay_is_refused_with_a_stable_code_and_nothing_changes(env):
    task = _sleeping_on_v1(env)
    before = (Task.objects.filter(id=task).values().get(), AuditEvent.objects.count())
    with (
        deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)),
        pytest.raises(UpgradeDoesNotReplay) as refused,
    ):
        task_upgrade(task_id=task, tenant="acme", version="2", actor="user:alice")
    assert refused.value.code == "UPGRADE_DOES_NOT_REPLAY"
    assert refused.value.details["matched"] == 0 and "diverged at step 0" in refused.value.message
    assert (Task.objects.filter(id=task).values().get(), AuditEvent.objects.count()) == before


def test_an_upgrade_that_replays_moves_the_task_audited_and_it_finishes_on_the_new_code(env):
    task = _sleeping_on_v1(env)
    with deployed("v.reorder", ("1", code.reorder_v1), ("3", code.reorder_v3)):
        done = task_upgrade(task_id=task, tenant="acme", version="3", actor="user:alice")
        assert (done.from_version, done.to_version, done.replayed) == ("1", "3", 2)
        assert _version(task) == "3"
        assert env.events(task)[-1] == "task.upgraded"
        env.advance(2 * HOUR)
        env.run_until_idle()
    assert env.result(task).output == {"version": "3", "order": ["a", "b", "c"]}


def test_an_upgrade_is_refused_for_a_version_not_served_here_or_a_finished_task(env):
    task = _sleeping_on_v1(env)
    with pytest.raises(VersionNotServed):
        task_upgrade(task_id=task, tenant="acme", version="9", actor="user:alice")
    with deployed("v.reorder", ("1", code.reorder_v1)):
        env.advance(2 * HOUR)
        env.run_until_idle()
    with pytest.raises(TaskNotUpgradable):
        task_upgrade(task_id=task, tenant="acme", version="2", actor="user:alice")


def test_upgrading_every_task_of_a_version_moves_those_that_replay_and_names_the_rest(env):
    tasks = [_sleeping_on_v1(env) for _ in range(3)]
    with deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)):
        done = version_upgrade(agent="v.reorder", from_version="1", tenant="acme", version="2", actor="user:alice")
    assert done.upgraded == [] and done.refused == {str(t): "UPGRADE_DOES_NOT_REPLAY" for t in tasks}
    with deployed("v.reorder", ("1", code.reorder_v1), ("3", code.reorder_v3)):
        done = version_upgrade(agent="v.reorder", from_version="1", tenant="acme", version="3", actor="user:alice")
    assert len(done.upgraded) == 3 and done.refused == {}


# --- retiring ---------------------------------------------------------------------------------


def test_a_version_with_unfinished_tasks_is_not_retired_and_a_retired_one_takes_no_new_task(env):
    task = _sleeping_on_v1(env)
    with pytest.raises(VersionInUse):
        version_retire(agent="v.reorder", version="1", actor="user:alice")
    with deployed("v.reorder", ("1", code.reorder_v1)):
        env.advance(2 * HOUR)
        env.run_until_idle()
        assert env.result(task).status == states.COMPLETED
        assert version_retire(agent="v.reorder", version="1", actor="user:alice") is True
        assert version_retire(agent="v.reorder", version="1", actor="user:alice") is False
        # A worker whose current version is retired starts nothing of it: the task waits.
        late = env.submit("v.reorder", {"sleep": 0})
        env.run_until_idle()
        assert (env.result(late).status, _version(late)) == (states.QUEUED, None)
    assert {r.version: r.retired for r in version_overview(tenant="acme", agent="v.reorder")}["1"] is True
    with deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)):  # a deploy of 2
        env.run_until_idle()
    assert (env.result(late).status, _version(late)) == (states.COMPLETED, "2")


def test_a_submit_naming_a_retired_version_is_refused(env):
    """steward_submit() still refuses a version named at submission (none of Steward's
    callers names one now; the check stays for a submit of an older process)."""
    from runtime.tasks.services import _submit

    env.submit("v.patched", {"sleep": 0})  # the pool, made on first use
    version_retire(agent="v.reorder", version="1", actor="user:alice")
    row = _submit(
        {
            "id": None,
            "agent": "v.reorder",
            "input": "{}",
            "digest": "d",
            "tenant": "acme",
            "owner": "user:alice",
            "pool": default_pool_name(),
            "key": None,
            "actor": "user:alice",
            "audit": "{}",
            "parent": None,
            "root": None,
            "spawn_seq": None,
            "version": "1",
        }
    )
    assert row.outcome == "retired"
    assert not Task.objects.filter(agent="v.reorder").exists()


# --- the version is fixed when the task starts --------------------------------------------------


def test_a_task_submitted_where_v1_is_current_but_first_claimed_by_a_worker_of_v2_runs_v2(env):
    # The API process was not restarted after the deploy: it still has only version 1.
    with deployed("v.reorder", ("1", code.reorder_v1)):
        task = env.submit("v.reorder", {"sleep": 0})
    assert _version(task) is None  # not started: no version yet
    assert task_detail(task).task.agent_version is None
    # The workers run the new deploy: version 2 is current there, 1 still served.
    with deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)):
        env.run_until_idle()
    assert env.result(task).output == {"version": "2", "order": ["b", "a"]}
    assert _version(task) == "2"
    started = AuditEvent.objects.filter(task_id=task, kind="attempt.started").order_by("id").first()
    assert started is not None and started.data["version"] == "2"


def test_later_attempts_are_fenced_to_the_version_the_first_claim_fixed(env):
    with deployed("v.reorder", ("1", code.reorder_v1)):
        task = env.submit("v.reorder", {"sleep": HOUR})
        env.run_until_idle()
    assert (env.result(task).status, _version(task)) == (states.SLEEPING, "1")
    env.advance(2 * HOUR)
    # Woken, it is not started again on the new current version: only a worker of 1 runs it.
    assert claim_next(pool=default_pool_name(), worker="new", served=(["v.reorder"], ["2"])) is None
    with deployed("v.reorder", ("1", code.reorder_v1), ("2", code.reorder_v2)):
        env.run_until_idle()
    assert env.result(task).output == {"version": "1", "order": ["a", "b"]}


def test_a_worker_that_does_not_serve_the_agent_does_not_start_its_task(env):
    with deployed("v.reorder", ("1", code.reorder_v1)):
        task = env.submit("v.reorder", {})
    assert claim_next(pool=default_pool_name(), worker="other", served=(["v.patched"], ["1"])) is None
    claim = claim_next(pool=default_pool_name(), worker="w", served=(["v.reorder", "v.reorder"], ["1", "3"]))
    assert claim is not None and claim.version == "3" and _version(task) == "3"  # the last listed is current


def test_a_task_not_started_waits_visibly_only_when_no_live_worker_serves_its_agent(env):
    with deployed("v.reorder", ("1", code.reorder_v1)):
        task = env.submit("v.reorder", {})
    process_stopped(kind="worker")
    assert task_detail(task).waiting_for_version == ANY_VERSION
    rows = {r.version: r for r in version_overview(tenant="acme", agent="v.reorder")}
    assert rows[None].waiting and rows[None].tasks == {"queued": 1} and rows[None].workers == []
    with deployed("v.reorder", ("7", code.reorder_v1)):  # a worker of any version of it
        process_beat(kind="worker", totals={}, fresh={}, waits=[])
    assert task_detail(task).waiting_for_version is None
    rows = {r.version: r for r in version_overview(tenant="acme", agent="v.reorder")}
    assert not rows[None].waiting and rows[None].workers
    process_stopped(kind="worker")
