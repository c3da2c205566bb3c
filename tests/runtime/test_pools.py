"""Pools exist only because someone created them, and every creation is audited: an
operator with pool-create, or a first submit into the default pool or an agent's
declared pool. Naming any other pool is UNKNOWN_POOL, everywhere, and creates nothing.
Limits are bounded; a pool can be removed while no task names it.
"""

from __future__ import annotations

from collections import Counter

import pytest
from django.conf import settings

from console.dev.demo.seed import POOLS, seed_demo
from runtime.limits.services import pool_create, pool_remove, pool_set_limits
from runtime.models import AuditEvent, Pool, Slot, Task
from runtime.stops.services import task_stop
from runtime.tasks.services import Submission, task_submit
from tests.harness import race
from tests.runtime.test_cli import ALICE
from tests.snapshot import refusal, refused


def pool_events(kind: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(chain="tenant:system", kind=kind).order_by("id"))


# --- creating ---------------------------------------------------------------------------------


def test_pool_create_makes_the_pool_its_slots_and_an_audit_row(db):
    pool = pool_create(name="batch", max_running=3, max_queued=7, actor="user:alice", note="nightly jobs")

    assert (pool.name, pool.max_running, pool.max_queued) == ("batch", 3, 7)
    assert sorted(Slot.objects.filter(pool="batch", task__isnull=True).values_list("number", flat=True)) == [0, 1, 2]
    (event,) = pool_events("pool.created")
    assert (event.actor, event.tenant, event.task_id) == ("user:alice", "system", None)
    assert event.data == {"pool": "batch", "max_running": 3, "max_queued": 7, "why": "nightly jobs"}


def test_creating_a_pool_that_exists_is_refused_with_pool_exists(db):
    pool_create(name="batch", max_running=3, max_queued=7, actor="user:alice")
    error = refused("POOL_EXISTS", lambda: pool_create(name="batch", max_running=9, max_queued=9, actor="user:bob"))
    assert error.details == {"pool": "batch"}
    assert Pool.objects.get(name="batch").max_running == 3


def test_racing_creators_of_one_pool_make_it_once(live):
    outcomes = Counter()
    for trial in range(10):
        name = f"raced-{trial}"
        results = race(8, lambda i: pool_create(name=name, max_running=2, max_queued=2, actor=f"user:{i}"))
        outcomes.update(type(r).__name__ for r in results)
        assert Slot.objects.filter(pool=name).count() == 2
        assert sum(e.data["pool"] == name for e in pool_events("pool.created")) == 1
    assert outcomes == Counter(Pool=10, PoolExists=70)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("bad pool!", "INVALID_IDENTIFIER"),
        ("p" * 101, "INVALID_IDENTIFIER"),
        ("", "INVALID_IDENTIFIER"),
        ("pööl", "INVALID_IDENTIFIER"),
        ("a/b", "INVALID_IDENTIFIER"),
        ("x\x00", "INVALID_IDENTIFIER"),
        (None, "INVALID_IDENTIFIER"),
    ],
    ids=["space-and-bang", "over-long", "empty", "not-ascii", "slash", "nul", "none"],
)
def test_a_pool_name_that_is_not_a_slug_is_refused(db, name, code):
    assert refusal(lambda: pool_create(name=name, max_running=1, max_queued=1, actor="user:alice")) == (code, [])
    assert refusal(lambda: pool_set_limits(name=name, max_running=1, actor="user:alice")) == (code, [])
    assert refusal(lambda: pool_remove(name=name, actor="user:alice")) == (code, [])


def test_a_slug_of_100_characters_is_a_pool_name(db):
    assert pool_create(name="p" * 99 + "_", max_running=1, max_queued=0, actor="user:alice").name == "p" * 99 + "_"


@pytest.mark.parametrize(
    "limits",
    [
        {"max_running": 0, "max_queued": 1},
        {"max_running": 10_001, "max_queued": 1},
        {"max_running": 2**31, "max_queued": 1},
        {"max_running": 1, "max_queued": -1},
        {"max_running": 1, "max_queued": 10_000_001},
        {"max_running": 1, "max_queued": 2**31},
        {"max_running": "3", "max_queued": 1},
        {"max_running": True, "max_queued": 1},
        {"max_running": 2.0, "max_queued": 1},
    ],
    ids=[
        "running-zero",
        "running-past-max",
        "running-2-31",
        "queued-negative",
        "queued-past-max",
        "queued-2-31",
        "running-string",
        "running-bool",
        "running-float",
    ],
)
def test_limits_outside_their_bounds_are_refused_before_anything_is_written(db, limits):
    pool_create(name="batch", max_running=2, max_queued=2, actor="user:alice")
    out_of_range = ("ARGUMENT_OUT_OF_RANGE", [])
    assert refusal(lambda: pool_create(name="fresh", actor="user:alice", **limits)) == out_of_range
    assert refusal(lambda: pool_set_limits(name="batch", actor="user:alice", **limits)) == out_of_range
    assert Slot.objects.filter(pool="batch").count() == 2


def test_the_largest_limits_are_accepted_and_settings_may_raise_them(db, monkeypatch):
    pool = pool_create(name="wide", max_running=10_000, max_queued=10_000_000, actor="user:alice")
    assert Slot.objects.filter(pool=pool).count() == 10_000

    monkeypatch.setitem(settings.STEWARD, "POOL_MAX_RUNNING", 12_000)
    pool_set_limits(name="wide", max_running=12_000, actor="user:alice")
    assert Slot.objects.filter(pool=pool).count() == 12_000


# --- unknown pools ------------------------------------------------------------------------------


def test_submitting_into_an_unknown_pool_is_refused_and_creates_nothing(db):
    error = refused("UNKNOWN_POOL", lambda: task_submit(agent="t.steps", input={}, pool="nosuch", **ALICE))
    assert error.details == {"pool": "nosuch"}
    assert not Pool.objects.exists()


def test_changing_the_limits_of_an_unknown_pool_is_refused_and_creates_nothing(db):
    assert refusal(lambda: pool_set_limits(name="nosuch", max_running=3, actor="user:alice")) == ("UNKNOWN_POOL", [])
    assert refusal(lambda: pool_set_limits(name="nosuch", actor="user:alice")) == ("UNKNOWN_POOL", [])
    assert not Pool.objects.exists()


def test_an_agents_declared_pool_is_unknown_to_other_agents(db):
    """research.batch declares `research`; t.steps declares no pool, so naming `research`
    for it is a typo like any other until the pool exists."""
    assert refusal(lambda: task_submit(agent="t.steps", input={}, pool="research", **ALICE)) == ("UNKNOWN_POOL", [])


# --- first use -----------------------------------------------------------------------------------


def test_the_default_pool_is_created_on_first_use_and_audited(db):
    sub = task_submit(agent="t.steps", input={}, **ALICE)

    default = settings.STEWARD["DEFAULT_POOL"]
    pool = Pool.objects.get(name=default["name"])
    assert (pool.max_running, pool.max_queued) == (default["max_running"], default["max_queued"])
    assert Task.objects.get(id=sub.task_id).pool_id == "default"
    (event,) = pool_events("pool.created")
    assert event.actor == "user:alice"
    assert event.data == {
        "pool": "default",
        "max_running": default["max_running"],
        "max_queued": default["max_queued"],
        "why": "first use of the default pool (DEFAULT_POOL)",
    }

    task_submit(agent="t.steps", input={}, **ALICE)
    assert len(pool_events("pool.created")) == 1


def test_an_agents_declared_pool_is_created_on_its_first_use_and_audited(db):
    task_submit(agent="research.batch", input={"question": "why?"}, **ALICE)

    (event,) = pool_events("pool.created")
    assert (event.actor, event.data["pool"]) == ("user:alice", "research")
    assert event.data["why"] == "first use of the pool declared by agent research.batch"


def test_racing_first_submits_create_the_default_pool_once(live):
    results = race(10, lambda i: task_submit(agent="t.steps", input={"i": i}, **ALICE))
    assert all(isinstance(r, Submission) and r.created for r in results), results
    assert len(pool_events("pool.created")) == 1
    assert Slot.objects.filter(pool="default").count() == settings.STEWARD["DEFAULT_POOL"]["max_running"]


# --- removing ---------------------------------------------------------------------------------------


def test_a_pool_no_task_names_can_be_removed_audited_and_is_then_unknown(db):
    pool_create(name="spare", max_running=2, max_queued=3, actor="user:alice")

    pool_remove(name="spare", actor="user:bob", note="never used")

    assert not Pool.objects.filter(name="spare").exists()
    assert not Slot.objects.filter(pool="spare").exists()
    (event,) = pool_events("pool.removed")
    assert (event.actor, event.data) == (
        "user:bob",
        {"pool": "spare", "max_running": 2, "max_queued": 3, "why": "never used"},
    )
    assert refusal(lambda: task_submit(agent="t.steps", input={}, pool="spare", **ALICE)) == ("UNKNOWN_POOL", [])
    assert refusal(lambda: pool_remove(name="spare", actor="user:bob")) == ("UNKNOWN_POOL", [])


def test_a_pool_any_task_ever_named_cannot_be_removed(db):
    pool_create(name="batch", max_running=1, max_queued=5, actor="user:alice")
    task_id = task_submit(agent="t.steps", input={}, pool="batch", **ALICE).task_id
    assert refusal(lambda: pool_remove(name="batch", actor="user:alice")) == ("POOL_IN_USE", [])

    task_stop(task_id=task_id, actor="user:alice", reason="test")  # finished tasks are kept, and still name it
    error = refused("POOL_IN_USE", lambda: pool_remove(name="batch", actor="user:alice"))
    assert error.details == {"pool": "batch"}


# --- the demo seed -----------------------------------------------------------------------------------


def test_seeding_twice_keeps_the_limits_an_operator_changed(db):
    first = seed_demo()
    assert {name: Pool.objects.get(name=name).max_running for name in POOLS} == {
        name: limits["max_running"] for name, limits in POOLS.items()
    }
    pool_set_limits(name="research", max_running=9, max_queued=90, actor="user:bob")
    tasks, limits_changes = Task.objects.count(), len(pool_events("pool.limits"))

    again = seed_demo()

    research = Pool.objects.get(name="research")
    assert (research.max_running, research.max_queued) == (9, 90)
    assert "pool research (running≤9, queued≤90) kept" in again
    assert any(line.endswith("created") for line in first if line.startswith("pool research"))
    assert (Task.objects.count(), len(pool_events("pool.limits"))) == (tasks, limits_changes)
    assert sorted(e.data["pool"] for e in pool_events("pool.created")) == sorted(POOLS)
