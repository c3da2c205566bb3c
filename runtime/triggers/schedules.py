"""Cron schedules: create, pause, resume, and firing what is due (the supervisor sweep).

Firing one tick is ONE transaction holding two writes: the conditional UPDATE that moves
`next_fire_at` on (WHERE next_fire_at = the tick), and the submission, whose caller key
is derived from (schedule, tick). Two supervisors racing one tick: the row lock (SKIP
LOCKED) and the WHERE let exactly one of them move it, and the other does nothing. A
process killed anywhere: either both writes committed (the tick fired and is past) or
neither did (the tick is still due and the next sweep of any process fires it), so a
restart of every process neither loses a tick nor repeats one.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass

from django.db import transaction
from django.db.models.functions import Now

from runtime import arguments, db, faults, states
from runtime.audit import AuditKind, audit_append
from runtime.errors import InvalidCron, InvalidTransition, ScheduleNotFound, StewardError
from runtime.models import Schedule, Task
from runtime.models.trigger import MISSED_POLICIES, OVERLAP_POLICIES
from runtime.stops.services import task_stop
from runtime.tasks.services import task_submit
from runtime.triggers import cron as cronlib
from runtime.triggers import target

log = logging.getLogger(__name__)

# A tick fired within this long of its time is on time; later, it is missed and the
# schedule's missed policy decides (skip it, or one catch-up run for all missed ticks).
GRACE = dt.timedelta(seconds=60)
# Counting missed ticks stops here: a per-minute schedule down for a month is "1000+".
MISSED_COUNT_MAX = 1000


def schedule_create(
    *,
    tenant: str,
    name: str,
    agent: str,
    input: dict,
    owner: str,
    cron: str,
    actor: str,
    timezone: str = "UTC",
    missed_policy: str = "skip",
    overlap_policy: str = "skip",
    pool: str | None = None,
    paused: bool = False,
) -> Schedule:
    """Make a schedule.

    1. Check the target as task_submit would (agent, input, owner, pool), the cron
       expression, the timezone and the policies.
    2. Compute the first tick after now (the database's clock); refuse an expression
       that never fires.
    3. Insert it and audit `schedule.created` in one transaction.
    """
    target.check(tenant=tenant, agent=agent, input=input, owner=owner, pool=pool, actor=actor)
    name = target.name(name)
    parsed, tz = cronlib.parse(cron), cronlib.zone(timezone)
    target.choice("missed_policy", missed_policy, MISSED_POLICIES)
    target.choice("overlap_policy", overlap_policy, OVERLAP_POLICIES)
    with transaction.atomic(durable=True):
        first = parsed.next_after(db.clock(), tz)
        if first is None:
            raise InvalidCron(f"cron {parsed.text!r} never fires", field="cron")
        schedule = target.create_named(
            Schedule,
            "schedule",
            tenant=tenant,
            name=name,
            agent=agent,
            input=input,
            owner=owner,
            pool=pool,
            cron=parsed.text,
            timezone=timezone,
            missed_policy=missed_policy,
            overlap_policy=overlap_policy,
            paused=bool(paused),
            next_fire_at=first,
            created_by=actor,
        )
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.SCHEDULE_CREATED,
            data={
                "schedule": str(schedule.id),
                "name": name,
                "agent": agent,
                "cron": parsed.text,
                "timezone": timezone,
                "missed_policy": missed_policy,
                "overlap_policy": overlap_policy,
                "next_fire_at": first.isoformat(),
            },
        )
    return schedule


def schedule_get(schedule_id, *, tenant: str | None = None) -> Schedule:
    return target.get(Schedule, ScheduleNotFound, "schedule", schedule_id, tenant)


def schedule_pause(*, schedule_id, actor: str, tenant: str | None = None) -> bool:
    """Pause: no tick fires while paused. Returns False if it was already paused."""
    arguments.actor(actor)
    with transaction.atomic(durable=True):
        schedule = schedule_get(schedule_id, tenant=tenant)
        won = Schedule.objects.filter(id=schedule.id, paused=False).update(paused=True, updated_at=Now()) == 1
        if won:
            audit_append(
                actor=actor,
                tenant=schedule.tenant,
                kind=AuditKind.SCHEDULE_PAUSED,
                data={"schedule": str(schedule.id), "name": schedule.name},
            )
    return won


def schedule_resume(*, schedule_id, actor: str, tenant: str | None = None) -> bool:
    """Resume: the next tick is the first after now. The ticks that passed while paused
    are not missed runs (the operator asked for none), so they never fire."""
    arguments.actor(actor)
    with transaction.atomic(durable=True):
        schedule = schedule_get(schedule_id, tenant=tenant)
        upcoming = cronlib.parse(schedule.cron).next_after(db.clock(), cronlib.zone(schedule.timezone))
        won = (
            Schedule.objects.filter(id=schedule.id, paused=True).update(
                paused=False, next_fire_at=upcoming, updated_at=Now()
            )
            == 1
        )
        if won:
            audit_append(
                actor=actor,
                tenant=schedule.tenant,
                kind=AuditKind.SCHEDULE_RESUMED,
                data={
                    "schedule": str(schedule.id),
                    "name": schedule.name,
                    "next_fire_at": upcoming.isoformat() if upcoming else None,
                },
            )
    return won


def tick_key(schedule_id, tick: dt.datetime) -> str:
    """The caller key of one tick's task: the same (schedule, tick) always names it."""
    return f"schedule:{schedule_id}:{tick.astimezone(dt.UTC):%Y%m%dT%H%M%SZ}"


@dataclass
class Fired:
    outcome: str  # fired | missed | overlap_skipped | overlap_waiting | refused | lost (another won)
    tick: dt.datetime | None = None
    task_id: uuid.UUID | None = None


@db.reads("schedule_due")
@dataclass(frozen=True, slots=True)
class _Due:
    id: uuid.UUID  # the schedule
    next_fire_at: dt.datetime  # its due tick


def schedules_fire_due(*, actor: str, limit: int = 100) -> list[Fired]:
    """The sweep's step: fire every due tick (runtime/worker/supervisor.py)."""
    done = []
    for due in db.fetchall("schedule_due", {"limit": limit}, row=_Due):
        schedule_id, tick = due.id, due.next_fire_at
        try:
            done.append(schedule_fire(schedule_id=schedule_id, tick=tick, actor=actor))
        except StewardError as exc:
            # One schedule's refusal (its previous run could not be stopped, say) must not
            # hold back every other schedule's tick: logged, and retried next sweep.
            log.warning("schedule %s tick %s not fired: %s: %s", schedule_id, tick, exc.code, exc.message)
            done.append(Fired("error", tick))
    return done


def schedule_fire(*, schedule_id, tick: dt.datetime, actor: str) -> Fired:
    """Fire one due tick, once, however many supervisors try.

    1. Overlap policy `stop`: if the previous run is live, stop it first (its own
       transaction; a second supervisor's stop is refused and ignored).
    2. Lock the schedule row (SKIP LOCKED: another supervisor is firing it) still at
       this tick; otherwise another supervisor already moved it: lost.
    3. Decide: a live previous run with overlap `skip` drops the tick, with `queue`
       leaves it due until that run ends; a tick later than GRACE is missed and the
       missed policy drops it or fires one catch-up run for every missed tick.
    4. Move next_fire_at on (WHERE next_fire_at = tick) and submit with the tick's key,
       in the same transaction, audited.
    """
    schedule = Schedule.objects.filter(id=schedule_id).values("overlap_policy", "last_task_id", "name").first()
    if schedule and schedule["overlap_policy"] == "stop" and schedule["last_task_id"]:
        previous = Task.objects.filter(id=schedule["last_task_id"]).values_list("status", flat=True).first()
        if previous in states.LIVE and previous != states.STOPPING:
            try:
                task_stop(
                    task_id=schedule["last_task_id"],
                    actor=actor,
                    reason=f"schedule {schedule['name']}: the next run replaces it (overlap policy stop)",
                )
            except InvalidTransition:
                pass  # it finished, or another supervisor stopped it first
    with transaction.atomic(durable=True):
        row = (
            Schedule.objects.select_for_update(skip_locked=True)
            .filter(id=schedule_id, next_fire_at=tick, paused=False)
            .first()
        )
        if row is None:
            return Fired("lost", tick)  # another supervisor holds or moved it, or it was paused
        return _decide(row, tick, actor)


def _decide(row: Schedule, tick: dt.datetime, actor: str) -> Fired:
    parsed, tz = cronlib.parse(row.cron), cronlib.zone(row.timezone)
    now = db.clock()
    after_now = parsed.next_after(now, tz)
    data = {"schedule": str(row.id), "name": row.name, "tick": tick.isoformat()}
    previous, previous_end = (
        Task.objects.filter(id=row.last_task_id).values_list("status", "finished_at").first()
        if row.last_task_id
        else None
    ) or (None, None)
    overlapping = previous in states.LIVE and not (row.overlap_policy == "stop" and previous == states.STOPPING)
    if overlapping and row.overlap_policy == "queue":
        # Leave the tick due: it fires (late, but not "missed") once the previous run ends.
        return Fired("overlap_waiting", tick)
    if overlapping and row.overlap_policy == "skip":
        _advance(row, tick, parsed.next_after(tick, tz))
        audit_append(
            actor=actor,
            tenant=row.tenant,
            kind=AuditKind.SCHEDULE_OVERLAP_SKIPPED,
            data={**data, "previous": str(row.last_task_id), "previous_status": previous},
        )
        return Fired("overlap_skipped", tick)
    fire_tick, upcoming = tick, parsed.next_after(tick, tz)
    # A tick that waited for its previous run (overlap `queue`) is late on purpose, not missed.
    waited = row.overlap_policy == "queue" and previous_end is not None and previous_end > tick
    late = now - tick > GRACE and not waited
    if late:
        missed = _missed_behind(parsed, tz, tick, now)
        data |= {"missed": missed, "last_missed": None}
        last = _last_due(parsed, tz, tick, now)
        data["last_missed"] = last.isoformat()
        if row.missed_policy == "skip":
            _advance(row, tick, after_now)
            audit_append(
                actor=actor,
                tenant=row.tenant,
                kind=AuditKind.SCHEDULE_MISSED,
                data={**data, "policy": "skip", "next_fire_at": _iso(after_now)},
            )
            return Fired("missed", tick)
        fire_tick, upcoming = last, after_now  # one catch-up run, for the latest missed tick
        data["catch_up"] = True
    _advance(row, tick, upcoming)
    try:
        with transaction.atomic():  # a savepoint: a refused submission still moves the tick on
            submission = task_submit(
                agent=row.agent,
                input=row.input,
                tenant=row.tenant,
                owner=row.owner,
                actor=actor,
                pool=row.pool,
                idempotency_key=tick_key(row.id, fire_tick),
            )
    except StewardError as exc:
        audit_append(
            actor=actor,
            tenant=row.tenant,
            kind=AuditKind.SCHEDULE_REFUSED,
            data={**data, "code": exc.code, "message": exc.message[:500]},
        )
        return Fired("refused", fire_tick)
    Schedule.objects.filter(id=row.id).update(last_task=submission.task_id, last_tick_at=fire_tick)
    audit_append(
        actor=actor,
        tenant=row.tenant,
        task_id=submission.task_id,
        kind=AuditKind.SCHEDULE_FIRED,
        data={
            **data,
            "fired_tick": fire_tick.isoformat(),
            "task": str(submission.task_id),
            "next_fire_at": _iso(upcoming),
        },
    )
    # Both writes made, neither committed: a process killed here loses both, and the
    # tick is still due for the next sweep of any process (tests/integration/test_schedules.py).
    faults.reach(faults.IN_SCHEDULE_FIRE, task_id=row.id, step="fire", epoch=0)
    return Fired("fired", fire_tick, submission.task_id)


def _advance(row: Schedule, tick: dt.datetime, upcoming: dt.datetime | None) -> None:
    # The row is locked by this transaction, so this always wins; the WHERE says what
    # it would have raced had the lock been skipped: another supervisor firing this tick.
    won = Schedule.objects.filter(id=row.id, next_fire_at=tick).update(next_fire_at=upcoming, updated_at=Now())
    assert won == 1, "the schedule row is locked by this transaction"


def _missed_behind(parsed, tz, tick, now) -> int:
    count, at = 0, tick
    while at is not None and at <= now and count < MISSED_COUNT_MAX:
        count += 1
        at = parsed.next_after(at, tz)
    return count


def _last_due(parsed, tz, tick, now) -> dt.datetime:
    last, at = tick, tick
    for _ in range(MISSED_COUNT_MAX):
        at = parsed.next_after(at, tz)
        if at is None or at > now:
            break
        last = at
    return last


def _iso(value: dt.datetime | None):
    return value.isoformat() if value else None
