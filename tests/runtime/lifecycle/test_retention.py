"""Retention (runtime/lifecycle/retention.py): a tenant's periods, set through one audited
service and held to "the trail outlives what it records"; the daily job, run by the
sweep on the harness's clock, tombstones finished tasks' payloads once past their period
and never a live task's, and the chains still verify."""

from __future__ import annotations

import pytest

from runtime import states
from runtime.agents import agent
from runtime.errors import StewardError
from runtime.lifecycle.retention import retention_affects, retention_get, retention_set
from runtime.memory import services
from runtime.models import AuditEvent, MemoryRecord, RetentionPolicy, Step, Task
from runtime.testing import StewardTestEnv
from runtime.trail.services import audit_verify
from runtime.worker import supervisor
from tests.runtime.memory import kinds  # noqa: F401  (declares test_note and memory.reader)

pytestmark = pytest.mark.django_db(transaction=True)
DAY = 86_400
PERIODS = {"task_days": 30, "gateway_days": 30, "memory_days": 30, "decision_days": 30, "audit_days": 90}


@agent("lifecycle.brief")
def brief(ctx, input):
    return {"said": ctx.step("say", lambda v: v, input["text"])}


@agent("lifecycle.napper")
def napper(ctx, input):
    ctx.sleep(100 * DAY)
    return {"said": input["text"]}


@pytest.fixture
def steward():
    supervisor._last_retention_day[0] = None
    with StewardTestEnv(tenant="acme", owner="user:alice") as env:
        yield env


def test_payloads_are_erased_once_past_the_period_and_not_before(steward):
    done = steward.submit("lifecycle.brief", {"text": "old news"})
    sleeping = steward.submit("lifecycle.napper", {"text": "still needed"})
    other = steward.submit("lifecycle.brief", {"text": "globex keeps"}, tenant="globex")
    steward.run_until_idle()
    assert Task.objects.get(id=sleeping).status == states.SLEEPING
    retention_set(tenant="acme", actor="user:alice", reason="policy", **PERIODS)
    affects = {a.place: a.rows for a in retention_affects(tenant="acme", **PERIODS)}
    assert affects["task"] == 0  # nothing is 30 days old yet

    steward.advance(29 * DAY)
    steward.run_until_idle()
    assert Task.objects.get(id=done).input == {"text": "old news"}

    steward.advance(2 * DAY)
    assert {a.place: a.rows for a in retention_affects(tenant="acme", **PERIODS)}["task"] == 1
    steward.run_until_idle()
    task = Task.objects.get(id=done)
    assert task.input is None and task.output is None and task.erased_by.startswith("retention:")
    assert Step.objects.get(task_id=done).output is None
    assert Task.objects.get(id=sleeping).input == {"text": "still needed"}  # not finished: kept
    assert Task.objects.get(id=other).input == {"text": "globex keeps"}  # no policy: kept
    ran = AuditEvent.objects.get(kind="retention.ran", tenant="acme")
    assert ran.data["rows"] == {"task": 1, "journal": 1}
    assert audit_verify() is None


@pytest.mark.parametrize(
    ("periods", "code"),
    [
        ({**PERIODS, "audit_days": 10}, "INVALID_ARGUMENT"),  # the trail must outlive the rest
        ({**PERIODS, "task_days": None}, "INVALID_ARGUMENT"),  # kept for ever, past the trail
        ({**PERIODS, "task_days": 0}, "ARGUMENT_OUT_OF_RANGE"),
        ({**PERIODS, "task_days": -5}, "ARGUMENT_OUT_OF_RANGE"),
        ({**PERIODS, "task_days": 10**12}, "ARGUMENT_OUT_OF_RANGE"),
        ({**PERIODS, "task_days": "30"}, "ARGUMENT_OUT_OF_RANGE"),
        ({**PERIODS, "task_days": 1.5}, "ARGUMENT_OUT_OF_RANGE"),
        ({**PERIODS, "forever": 1}, "INVALID_ARGUMENT"),
    ],
)
def test_hostile_periods_are_refused_and_nothing_is_written(periods, code):
    with pytest.raises(StewardError) as refused:
        retention_set(tenant="acme", actor="user:alice", reason="x", **periods)
    assert refused.value.code == code
    assert not RetentionPolicy.objects.exists() and not AuditEvent.objects.filter(kind="retention.set").exists()


def test_a_change_is_audited_with_before_and_after():
    retention_set(tenant="acme", actor="user:alice", reason="first", **PERIODS)
    retention_set(tenant="acme", actor="user:alice", reason="longer", **{**PERIODS, "task_days": 60})
    assert retention_get(tenant="acme")["task_days"] == 60 and retention_get(tenant="acme")["version"] == 2
    last = AuditEvent.objects.filter(kind="retention.set").order_by("-id").first()
    assert (last.data["before"]["task_days"], last.data["after"]["task_days"], last.data["why"]) == (30, 60, "longer")


def test_memory_is_erased_once_written_longer_ago_than_memory_days(steward):
    """Measured from each version's writing, on the harness's clock: superseded and current
    versions alike, so a record not rewritten within the period reads as no record."""

    def remember(key, text, tenant="acme"):
        services.memory_put(
            tenant=tenant, agent="memory.reader", kind="test_note", key=key, value={"text": text}, actor="user:alice"
        )

    remember("old", "first thought")
    remember("old", "second thought")  # supersedes it; both written on day 0
    remember("other", "globex keeps", tenant="globex")  # no policy there
    retention_set(tenant="acme", actor="user:alice", reason="policy", **PERIODS)
    steward.advance(20 * DAY)
    remember("fresh", "written on day 20")
    steward.advance(11 * DAY)  # day 31: "old" is past 30 days, "fresh" is 11 days old
    assert {a.place: a.rows for a in retention_affects(tenant="acme", **PERIODS)}["memory"] == 2
    steward.run_until_idle()
    old = MemoryRecord.objects.filter(tenant="acme", key="old")
    assert [r.payload for r in old] == [None, None] and all(r.erased_by.startswith("retention:") for r in old)
    assert MemoryRecord.objects.get(tenant="acme", key="fresh").payload["text"] == "written on day 20"
    assert MemoryRecord.objects.get(tenant="globex").payload["text"] == "globex keeps"
    assert AuditEvent.objects.get(kind="retention.ran", tenant="acme").data["rows"] == {"memory": 2}
    task = steward.submit("memory.reader", {"key": "old"})
    steward.run_until_idle()
    assert steward.result(task).output == {"found": None}
    assert audit_verify() is None
