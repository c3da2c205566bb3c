"""Bounded growth: the high-volume tables are range-partitioned a day a partition
(migration 0032, docs/adr/0040-partitions.md), and retention drops whole partitions.

A partition's life (docs/state-machines.md, Partitions): created ahead by
partitions_ensure(), live while its day's rows arrive, detached and dropped by
partitions_drop_before() once its whole range lies before the cutoff; an audit partition
is first archived (runtime/lifecycle/archive.py), then dropped.

The DDL runs inside two SECURITY DEFINER functions owned by the schema's owner
(steward_partitions_ensure, steward_partition_drop): the application roles own no
table, and the functions hold the rules (a whole range past the cutoff; a task-keyed
partition only once all its tasks ended before it; an audit partition only once
archived), whoever calls them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.db import transaction

from runtime import arguments, db
from runtime.audit import AuditKind, audit_append

SYSTEM_TENANT = "system"  # the chain of fleet-wide acts: a partition holds every tenant's rows

# How many days ahead the daily job keeps partitions ready: a job that misses a few days
# still finds its rows a partition (and the default partition catches the rest).
AHEAD_DAYS = 7


class PartitionedTable(StrEnum):
    """The partitioned tables and their partition key (migration 0032)."""

    AUDIT = "steward_audit"  # by `at`; dropped only once archived
    DECISION = "steward_decision"  # by `id` (UUIDv7); held while a kept row references it
    GATEWAY_CALL = "steward_gateway_call"  # by `task_id` (UUIDv7): a task's calls in one partition
    STEP = "steward_step"  # the journal, by `task_id` like the calls


class DropOutcome(StrEnum):
    """What became of a partition whose range lies before the cutoff."""

    DROPPED = "dropped"  # detached and dropped
    LIVE_TASKS = "live_tasks"  # kept: a task in its range is unfinished, or ended after the cutoff
    NOT_ARCHIVED = "not_archived"  # kept: an audit partition not yet archived
    REFERENCED = "referenced"  # kept: a row elsewhere still references one of its rows (a foreign key)


@dataclass(frozen=True, slots=True)
class Dropped:
    partition: str
    upper_at: datetime
    outcome: str


@db.reads("partitions_ensure")
@dataclass(frozen=True, slots=True)
class _Made:
    name: str


def partitions_ensure(*, through: datetime | None = None, actor: str) -> list[str]:
    """Create each partitioned table's daily partitions from today (the database's clock)
    through `through` (default: AHEAD_DAYS from now); returns those it created.

    1. steward_partitions_ensure() creates the missing ones (existing ones are left alone;
       a day whose rows already sit in the default partition is skipped with a warning).
    2. One audit row (partitions.ensured) names what was created, when anything was.
    Idempotent: a second call the same day creates nothing and records nothing.
    """
    arguments.actor(actor)
    with transaction.atomic(durable=True):
        if through is None:
            through = db.clock() + timedelta(days=AHEAD_DAYS)
        made = [r.name for r in db.fetchall("partitions_ensure", {"through": through}, row=_Made)]
        if made:
            audit_append(
                actor=actor,
                tenant=SYSTEM_TENANT,
                kind=AuditKind.PARTITIONS_ENSURED,
                data={"partitions": made, "through": through.isoformat()},
            )
    return made


@db.reads("partition_drop")
@dataclass(frozen=True, slots=True)
class _Drop:
    partition: str
    upper_at: datetime
    outcome: str


def partitions_drop_before(*, table: PartitionedTable | str, cutoff: datetime, actor: str) -> list[Dropped]:
    """Detach and drop `table`'s partitions whose whole range ends at or before `cutoff`.

    1. steward_partition_drop() looks at each partition (never the default one) whose
       upper bound is at or before the cutoff; a task-keyed one (journal, gateway calls)
       only goes when every task in its range ended before the cutoff, an audit one only
       once archived (its chains' last rows then recorded as their boundaries), and a
       decision partition that a kept row references stays (its foreign key says so).
    2. Every partition dropped or kept is named in one audit row (partition.dropped),
       in the same transaction: a drop and its record commit together.
    Returns what became of each partition looked at; a partition straddling the cutoff
    is not looked at (its newer rows are inside the retention period).
    """
    arguments.actor(actor)
    table = PartitionedTable(table)
    if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
        raise TypeError("cutoff must be an aware datetime")
    with transaction.atomic(durable=True):
        found = [
            Dropped(r.partition, r.upper_at, r.outcome)
            for r in db.fetchall("partition_drop", {"table": str(table), "cutoff": cutoff}, row=_Drop)
        ]
        if found:
            audit_append(
                actor=actor,
                tenant=SYSTEM_TENANT,
                kind=AuditKind.PARTITION_DROPPED,
                data={
                    "table": str(table),
                    "cutoff": cutoff.isoformat(),
                    "dropped": [d.partition for d in found if d.outcome == DropOutcome.DROPPED],
                    "kept": {d.partition: d.outcome for d in found if d.outcome != DropOutcome.DROPPED},
                },
            )
    return found


def partitions_daily(*, retention_days: int, actor: str, now: datetime | None = None) -> dict[str, list[Dropped]]:
    """The daily job's partition part: drop what lies past `retention_days` in the journal,
    gateway calls and decisions (in that order: the calls reference decisions), then make
    sure the days ahead have partitions. The audit trail has its own, longer period and
    goes through runtime/lifecycle/archive.py (archive, then drop)."""
    if not isinstance(retention_days, int) or isinstance(retention_days, bool) or retention_days < 1:
        raise ValueError("retention_days must be a positive whole number of days")
    when = now if now is not None else db.clock()
    cutoff = when - timedelta(days=retention_days)
    dropped = {
        str(table): partitions_drop_before(table=table, cutoff=cutoff, actor=actor)
        for table in (PartitionedTable.STEP, PartitionedTable.GATEWAY_CALL, PartitionedTable.DECISION)
    }
    partitions_ensure(through=when + timedelta(days=AHEAD_DAYS), actor=actor)
    return dropped
