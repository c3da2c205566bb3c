"""Cron schedules at the database (runtime/triggers/schedules.py), with no worker: a due
tick is made by moving next_fire_at into the past, and the sweep's own call fires it.
Races release the firing calls together (tests/harness.py race()) and count outcomes."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from runtime import db, states
from runtime.errors import InvalidCron, InvalidInput, InvalidTimezone, UnknownAgent
from runtime.models import AuditEvent, Schedule, Task
from runtime.tasks.services import task_submit
from runtime.triggers import schedules
from runtime.triggers.services import (
    schedule_create,
    schedule_fire,
    schedule_pause,
    schedule_resume,
    schedules_fire_due,
    tick_key,
)
from tests.harness import race

ALICE = {"tenant": "acme", "owner": "user:alice", "actor": "user:alice"}
TRIALS = [pytest.param(25, id="25-trials"), pytest.param(200, id="200-trials", marks=pytest.mark.stress)]


def now() -> dt.datetime:
    return dt.datetime.fromtimestamp(db.fetchone("clock", {"seconds": 0})[0], dt.UTC)


# Yearly by default: the only ticks that come due in a test are the ones it sets (an
# every-minute schedule would bring its next real tick due whenever a minute turns).
def make(name="nightly", cron="0 0 1 1 *", **kw) -> Schedule:
    return schedule_create(
        name=name, agent=kw.pop("agent", "t.steps"), input=kw.pop("input", {"n": 1}), cron=cron, **ALICE, **kw
    )


def due(schedule: Schedule, ago: float = 5.0, base: dt.datetime | None = None) -> dt.datetime:
    """Make the schedule's next tick one that passed `ago` seconds before `base` (now)."""
    tick = ((base or now()) - dt.timedelta(seconds=ago)).replace(microsecond=0)
    Schedule.objects.filter(id=schedule.id).update(next_fire_at=tick)
    return tick


def tasks_of(schedule: Schedule):
    return Task.objects.filter(idempotency_key__startswith=f"schedule:{schedule.id}:")


def test_create_computes_the_first_tick_in_the_schedules_timezone(live):
    s = make(cron="0 9 * * *", timezone="Asia/Tokyo")
    assert s.next_fire_at > now()
    assert s.next_fire_at.astimezone(dt.timezone(dt.timedelta(hours=9))).hour == 9
    assert AuditEvent.objects.filter(kind="schedule.created", data__schedule=str(s.id)).count() == 1


@pytest.mark.parametrize(
    "kw, error",
    [
        ({"cron": "61 * * * *"}, InvalidCron),
        ({"cron": "0 0 31 2 *"}, InvalidCron),
        ({"timezone": "Nowhere/City"}, InvalidTimezone),
        ({"agent": "no.such.agent"}, UnknownAgent),
        ({"input": []}, InvalidInput),
        ({"missed_policy": "sometimes"}, Exception),
    ],
)
def test_a_bad_schedule_is_refused_when_made_not_when_it_fires(live, kw, error):
    with pytest.raises(error):
        make(**kw)
    assert not Schedule.objects.exists()


def test_a_due_tick_submits_one_task_with_the_ticks_caller_key_and_moves_on(live):
    s = make()
    tick = due(s)
    [fired] = schedules_fire_due(actor="supervisor:test")
    assert fired.outcome == "fired"
    task = Task.objects.get(id=fired.task_id)
    assert task.idempotency_key == tick_key(s.id, tick) and task.input == {"n": 1}
    s.refresh_from_db()
    assert s.next_fire_at > tick and s.last_task_id == task.id
    assert schedules_fire_due(actor="supervisor:test") == []  # nothing due any more
    assert AuditEvent.objects.filter(kind="schedule.fired", task_id=task.id).count() == 1


@pytest.mark.parametrize("trials", TRIALS)
def test_two_schedulers_racing_one_tick_submit_exactly_one_task(live, trials, monkeypatch):
    monkeypatch.setattr(schedules, "GRACE", dt.timedelta(hours=1))  # every trial's tick is on time
    s = make()
    outcomes, base = Counter(), now()
    for trial in range(trials):
        tick = due(s, ago=1 + trial, base=base)  # a distinct tick each trial
        Schedule.objects.filter(id=s.id).update(last_task=None)
        results = race(2, lambda i: schedule_fire(schedule_id=s.id, tick=tick, actor=f"supervisor:{i}"))
        outcomes.update(r.outcome if hasattr(r, "outcome") else repr(r) for r in results)
        assert Task.objects.filter(idempotency_key=tick_key(s.id, tick)).count() == 1
    print(dict(outcomes))
    assert outcomes == {"fired": trials, "lost": trials}
    assert tasks_of(s).count() == trials


def test_many_sweeps_racing_the_whole_due_list_fire_each_tick_once(live):
    made = [make(name=f"s{i}") for i in range(5)]
    for s in made:
        due(s)
    results = race(4, lambda i: schedules_fire_due(actor=f"supervisor:{i}"))
    fired = [f for r in results for f in r if f.outcome == "fired"]
    assert len(fired) == 5
    assert all(tasks_of(s).count() == 1 for s in made)


def test_a_paused_schedule_does_not_fire_and_resuming_skips_the_ticks_it_slept_through(live):
    s = make()
    assert schedule_pause(schedule_id=s.id, actor="user:alice")
    assert not schedule_pause(schedule_id=s.id, actor="user:alice")  # already paused
    due(s, ago=600)
    assert schedules_fire_due(actor="supervisor:test") == []
    assert schedule_resume(schedule_id=s.id, actor="user:alice")
    s.refresh_from_db()
    assert s.next_fire_at > now() and not tasks_of(s).exists()


def test_a_missed_tick_is_skipped_under_the_skip_policy(live):
    s = make(missed_policy="skip", cron="* * * * *")
    due(s, ago=schedules.GRACE.total_seconds() + 300)
    [fired] = schedules_fire_due(actor="supervisor:test")
    assert fired.outcome == "missed" and not tasks_of(s).exists()
    event = AuditEvent.objects.get(kind="schedule.missed")
    assert event.data["missed"] >= 5
    s.refresh_from_db()
    assert s.next_fire_at > now()


def test_missed_ticks_get_one_catch_up_run_under_the_catch_up_policy(live):
    s = make(missed_policy="catch_up", cron="* * * * *")
    due(s, ago=schedules.GRACE.total_seconds() + 300)
    [fired] = schedules_fire_due(actor="supervisor:test")
    assert fired.outcome == "fired" and tasks_of(s).count() == 1
    assert schedules_fire_due(actor="supervisor:test") == []  # one catch-up run, not one per tick
    s.refresh_from_db()
    assert s.next_fire_at > now()


@pytest.mark.parametrize(
    "policy, outcome, tasks", [("skip", "overlap_skipped", 1), ("queue", "overlap_waiting", 1), ("stop", "fired", 2)]
)
def test_a_tick_while_the_previous_run_is_live_follows_the_overlap_policy(live, policy, outcome, tasks):
    s = make(overlap_policy=policy)
    due(s, ago=10)
    [first] = schedules_fire_due(actor="supervisor:test")
    assert first.outcome == "fired"  # queued, nobody runs it: still live
    tick = due(s, ago=5)
    if policy == "queue":
        # The sweep does not even list it while the previous run is live; fired directly,
        # it still waits.
        assert schedules_fire_due(actor="supervisor:test") == []
        second = schedule_fire(schedule_id=s.id, tick=tick, actor="supervisor:test")
    else:
        [second] = schedules_fire_due(actor="supervisor:test")
    assert second.outcome == outcome and tasks_of(s).count() == tasks
    previous = Task.objects.get(id=first.task_id)
    if policy == "stop":
        assert previous.status in (states.STOPPING, states.CANCELLED)
    if policy == "queue":
        Schedule.objects.filter(id=s.id).update(next_fire_at=tick)
        Task.objects.filter(id=previous.id).update(status=states.COMPLETED, finished_at=now())
        # (the kept pool count is not the point here; put it back as a real finish would)
        db.execute("pool_count_fold", {})
        [third] = schedules_fire_due(actor="supervisor:test")
        assert third.outcome == "fired" and tasks_of(s).count() == 2


def test_the_supervisor_sweep_fires_due_ticks_and_settles_dependencies(live):
    from runtime.triggers.services import dependency_create
    from runtime.worker.supervisor import sweep

    s = make()
    due(s)
    done = Task.objects.filter(id=task_submit(agent="t.steps", input={}, **ALICE).task_id)
    done.update(status=states.COMPLETED)
    dependency_create(agent="t.steps", input={}, prerequisites=[str(done.get().id)], **ALICE)
    report = sweep(supervisor_id="test")
    assert (report.scheduled, report.triggered) == (1, 1)
    assert tasks_of(s).count() == 1
    assert sweep(supervisor_id="test").scheduled == 0


@pytest.mark.parametrize("what", ["schedule", "webhook"])
def test_creators_racing_one_name_get_one_row_and_a_stable_error_each_other_time(live, what):
    """The unique (tenant, name) decides: a read before the insert let two racers both
    pass it, and the loser got an IntegrityError (a 500 at the API)."""
    from runtime.errors import InvalidTransition
    from runtime.models import Webhook
    from runtime.triggers.services import webhook_create

    outcomes = Counter()
    for trial in range(20):
        name = f"race-{trial}"

        def create(_i, name=name):
            if what == "schedule":
                return make(name=name)
            return webhook_create(name=name, agent="t.steps", **ALICE)

        for result in race(4, create):
            outcomes[
                "created"
                if not isinstance(result, Exception)
                else "refused: name taken"
                if isinstance(result, InvalidTransition) and result.details["field"] == "name"
                else f"other: {result!r}"
            ] += 1
    rows = (Schedule if what == "schedule" else Webhook).objects.filter(tenant="acme", name__startswith="race-")
    print(f"\n4 {what} creators racing one name over 20 trials: {dict(outcomes)}")
    assert outcomes == Counter({"created": 20, "refused: name taken": 60})
    assert rows.count() == 20
    assert AuditEvent.objects.filter(kind=f"{what}.created").count() == 20
