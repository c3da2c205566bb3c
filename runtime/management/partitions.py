"""`manage.py steward partitions` and `steward audit archive|verify --archive`: bounded
growth from a terminal (docs/adr/0040-partitions.md), through runtime/lifecycle/."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django.core.management.base import CommandError

from runtime import db
from runtime.errors import InvalidArgument
from runtime.lifecycle.archive import Partition, audit_archive, audit_archive_verify
from runtime.lifecycle.partitions import PartitionedTable, partitions_drop_before, partitions_ensure
from runtime.management.format import table as text_table

DAYS_MAX = 366


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "partitions",
        help="the partitioned tables' daily partitions: list, create ahead, drop past a cutoff",
        description="ensure: create each table's partitions from today through --days ahead (the daily "
        "job does). drop: detach and drop --table's partitions whose whole range ends before --before "
        "(a task-keyed one only once all its tasks ended before it, an audit one only once archived: "
        "`audit archive`). Both audited.",
    )
    p.add_argument("action", choices=["list", "ensure", "drop"])
    p.add_argument("--table", choices=[str(t) for t in PartitionedTable], help="for list and drop")
    p.add_argument("--before", metavar="DATE", help="drop: the cutoff, a date (UTC midnight) or a time")
    p.add_argument("--days", type=int, default=7, help="ensure: how many days ahead (default 7)")


def before_arg(value: str | None, option: str = "--before") -> datetime:
    """A date (UTC midnight) or an ISO time with its offset; anything else INVALID_ARGUMENT."""
    if value is None:
        raise InvalidArgument(f"{option} DATE is required", field=option.lstrip("-"))
    text = value.strip()
    try:
        if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
        if len(text) <= 40:
            when = datetime.fromisoformat(text)
            if when.tzinfo is not None:
                return when
    except ValueError:
        pass
    raise InvalidArgument(f"{option} takes a date (2026-09-01) or a time with its offset", field=option.lstrip("-"))


def do_partitions(out, *, actor, action, table, before, days, **_) -> None:
    if action == "ensure":
        if not 1 <= days <= DAYS_MAX:
            raise InvalidArgument(f"--days must be 1 to {DAYS_MAX}", field="days")
        from datetime import timedelta

        made = partitions_ensure(through=db.clock() + timedelta(days=days), actor=actor)
        out.write(f"created {len(made)} partition(s)" + "".join(f"\n  {name}" for name in made))
        return
    if table is None:
        raise InvalidArgument("--table is required", field="table")
    if action == "list":
        parts = db.fetchall("partitions_list", {"table": table}, row=Partition)
        out.write(
            text_table(
                ["partition", "from", "to"],
                [[p.name, p.lower_at.isoformat() if p.lower_at else "-", p.upper_at.isoformat()] for p in parts],
            )
        )
        return
    found = partitions_drop_before(table=table, cutoff=before_arg(before), actor=actor)
    out.write(
        f"{sum(d.outcome == 'dropped' for d in found)} partition(s) dropped"
        + "".join(f"\n  {d.partition}: {d.outcome}" for d in found)
    )


def do_audit_archive(out, *, actor, before, out_dir, **_) -> None:
    if not out_dir:
        raise InvalidArgument("--out DIR is required", field="out")
    archived, dropped = audit_archive(before=before_arg(before), out=out_dir, actor=actor)
    out.write(
        f"archived {len(archived)} partition(s), dropped {sum(d.outcome == 'dropped' for d in dropped)}"
        + "".join(f"\n  {a.path}: {a.rows} rows, {a.seals} seals, sha256 {a.sha256}" for a in archived)
        + "".join(f"\n  {d.partition}: {d.outcome}" for d in dropped if d.outcome != "dropped")
    )


def do_audit_verify_archive(out, *, path) -> None:
    check = audit_archive_verify(path)
    counts = f"{check.files} file(s), {check.rows:,} rows, {check.seals} seal(s)"
    if not check.ok:
        raise CommandError("\n".join(f"TAMPERED: {p}" for p in check.problems) + f" (checked {counts})", returncode=3)
    continued = f"; {check.continued} chain(s) continue from an earlier archive" if check.continued else ""
    out.write(f"audit archive verified: every row, link and seal is intact ({counts}{continued})")
