"""A tenant's retention periods, and the daily job that tombstones payloads past them
(docs/adr/0038-erasure-lifecycle.md). The audit trail's own period (audit_days) is read
by the audit archive, which archives and drops the trail; this job never touches it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from runtime import arguments, db, states
from runtime.audit import AuditKind, audit_append
from runtime.errors import InvalidArgument
from runtime.lifecycle import statements
from runtime.lifecycle.registry import PLACES
from runtime.models import RetentionPolicy

PERIODS = ("task_days", "gateway_days", "memory_days", "decision_days", "audit_days")
MAX_DAYS = 36_500  # a hundred years: past that, say "kept" (None)
BATCH_TASKS = 500  # tasks per tombstone statement
FINISHED = sorted(states.TERMINAL)


def retention_get(*, tenant: str) -> dict[str, int | None]:
    """A tenant's periods (None: kept), and its version (0: never set)."""
    arguments.tenant(tenant)
    row = RetentionPolicy.objects.filter(tenant=tenant).first()
    values = {p: getattr(row, p) if row else None for p in PERIODS}
    return {**values, "version": row.version if row else 0}


def _periods(given: dict) -> dict[str, int | None]:
    unknown = set(given) - set(PERIODS)
    if unknown:
        raise InvalidArgument(
            f"retention has {', '.join(PERIODS)}, not {', '.join(sorted(map(str, unknown)))}",
            field=sorted(map(str, unknown))[0],
        )
    out = {}
    for name in PERIODS:
        value = given.get(name)
        out[name] = None if value is None else arguments.bounded(name, value, minimum=1, maximum=MAX_DAYS)
    if out["audit_days"] is not None:
        for name in PERIODS[:-1]:
            if out[name] is None or out[name] > out["audit_days"]:
                raise InvalidArgument(
                    f"audit_days ({out['audit_days']}) must be at least {name} "
                    f"({'kept' if out[name] is None else out[name]}): the trail outlives what it records",
                    field="audit_days",
                )
    return out


def retention_set(*, tenant: str, actor: str, reason: str = "", **periods) -> RetentionPolicy:
    """Set all of a tenant's retention periods (each in days, or None: kept).

    1. Check the tenant, the actor, the reason and each period (1 to MAX_DAYS; audit_days
       at least every other one).
    2. Insert the tenant's row, or replace its periods and bump its version.
    3. The retention.set audit row, before and after, in the same transaction.
    """
    arguments.tenant(tenant)
    arguments.actor(actor)
    reason = arguments.text("reason", reason)
    after = _periods(periods)
    with transaction.atomic(durable=True):
        row = RetentionPolicy.objects.select_for_update().filter(tenant=tenant).first()
        before = {p: getattr(row, p) for p in PERIODS} if row else None
        if row is None:
            row = RetentionPolicy.objects.create(tenant=tenant, updated_by=actor, **after)
        else:
            # Locked above: no other writer moves it between this read and this write.
            RetentionPolicy.objects.filter(id=row.id).update(**after, version=row.version + 1, updated_by=actor)
            row.refresh_from_db()
        audit_append(
            actor=actor,
            tenant=tenant,
            kind=AuditKind.RETENTION_SET,
            data={"before": before, "after": after, "version": row.version, "why": reason},
        )
        return row


@dataclass(frozen=True)
class Affected:
    place: str
    what: str
    period: str
    days: int | None
    tasks: int  # finished tasks past the period with a live row here
    rows: int  # their live rows here: what the next run would erase


def retention_affects(*, tenant: str, now: datetime | None = None, **periods) -> list[Affected]:
    """What the next run would erase under these periods (the console shows it before a
    change is saved): per place, the finished tasks past their period and their rows."""
    arguments.tenant(tenant)
    given = _periods(periods)
    now = now or db.clock()
    out = []
    for place in PLACES:
        days = given.get(place.retention)
        tasks = rows = 0
        if days is not None and place.written is not None:
            # Measured from each row's own time of writing (memory): no tasks involved.
            rows = statements.run_expired_count(place, tenant=tenant, cutoff=now - timedelta(days=days))
        elif days is not None:
            ids = statements.run_finished_before(tenant=tenant, finished=FINISHED, cutoff=now - timedelta(days=days))
            for i in range(0, len(ids), BATCH_TASKS):
                rows += statements.run_count(place, tasks=ids[i : i + BATCH_TASKS])
            tasks = len(ids)
        out.append(Affected(place.name, place.what, place.retention, days, tasks, rows))
    return out


def retention_run(*, now: datetime | None = None, actor: str = "retention", batch: int = BATCH_TASKS) -> dict:
    """Tombstone every tenant's payloads past its periods; {tenant: {place: rows}}.

    Per tenant with a policy, per place with a period: take a batch of the tenant's
    finished tasks, finished before now - period, that still have a live row there, and
    tombstone those rows in one set-based UPDATE (its own transaction: a long run holds
    no lock for long, and one that stops part way resumes where it stopped). A place that
    names its `written` column (memory) is measured from that instead: a batch of the
    tenant's live rows written before now - period, tombstoned the same way. Each tenant
    that lost payloads gets a retention.ran audit row with the counts. `now` is the
    database's clock unless given (tests move it)."""
    now = now or db.clock()
    by = f"retention:{now.date().isoformat()}"
    report: dict[str, dict[str, int]] = {}
    for policy in RetentionPolicy.objects.order_by("tenant"):
        counts: dict[str, int] = {}
        for place in PLACES:
            days = getattr(policy, place.retention)
            if days is None:
                continue
            cutoff = now - timedelta(days=days)
            while place.written is not None:
                with transaction.atomic(durable=True):
                    erased = statements.run_expire(place, tenant=policy.tenant, cutoff=cutoff, batch=batch, by=by)
                if not erased:
                    break
                counts[place.name] = counts.get(place.name, 0) + len(erased)
            while place.written is None:
                with transaction.atomic(durable=True):
                    ids = statements.run_due(place, tenant=policy.tenant, finished=FINISHED, cutoff=cutoff, batch=batch)
                    if not ids:
                        break
                    erased = statements.run_tombstone(place, tasks=ids, by=by)
                    counts[place.name] = counts.get(place.name, 0) + len(erased)
        if counts:
            with transaction.atomic(durable=True):
                audit_append(
                    actor=actor,
                    tenant=policy.tenant,
                    kind=AuditKind.RETENTION_RAN,
                    data={"rows": counts, "run": by, "at": now.isoformat()},
                )
            report[policy.tenant] = counts
    return report
