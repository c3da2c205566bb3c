"""Bounded growth (migration 0032, runtime/lifecycle/partitions.py and archive.py,
docs/adr/0040-partitions.md): rows land in their day's partition, partitions are made
ahead, retention drops only whole partitions past its cutoff (and not a task-keyed one
with a live task, nor an unarchived audit one, nor a referenced decision one), and an
archived audit partition is checked standalone while the live trail still verifies.

In-process, on the `db` fixture: every partition made or dropped here is rolled back
with the test (PostgreSQL's DDL is transactional). The clock is the harness's.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from runtime.audit import AuditKind, audit_append
from runtime.db import clock
from runtime.ids import uuid7
from runtime.lifecycle import archive
from runtime.lifecycle.archive import audit_archive, audit_archive_verify
from runtime.lifecycle.partitions import PartitionedTable, partitions_drop_before, partitions_ensure
from runtime.models import AuditBoundary, AuditEvent, Pool, Task
from runtime.testing import set_clock_skew
from runtime.trail.seals import audit_seal_now, seal_problems
from runtime.trail.services import audit_check, audit_problems
from tests.tamper import bypassing_the_triggers

DAY = 86400


def partitions(table: str) -> set[str]:
    with connection.cursor() as cur:
        cur.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", [table])
        return {name for (name,) in cur.fetchall()}


def day_name(table: str, when: datetime) -> str:
    return f"{table}_p{when.astimezone(UTC):%Y%m%d}"


def midnight(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def where_is(table: str, column: str, value) -> str:
    with connection.cursor() as cur:
        cur.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE {column} = %s", [value])
        return cur.fetchone()[0]


def travel(days: float) -> datetime:
    """Move the database's clock `days` past the real one, and make its partitions."""
    set_clock_skew(days * DAY)
    partitions_ensure(actor="system:test")
    return clock()


def task_row(*, status: str = "completed", finished_days_ago: float | None = 0) -> str:
    """A task row made now (its id minted on the database's clock), bypassing submission:
    only its id's time, status and finish matter to the rules here."""
    with connection.cursor() as cur:
        cur.execute("SELECT steward_uuid7(now()), now()")
        minted, now = cur.fetchone()
    finished = None if finished_days_ago is None else now - timedelta(days=finished_days_ago)
    Task.objects.create(
        id=minted,
        agent="t.steps",
        input={},
        input_digest="",
        tenant="acme",
        owner="user:alice",
        pool=Pool.objects.get_or_create(name="lifecycle", defaults={"max_running": 10, "max_queued": 10})[0],
        status=status,
        epoch=1,
        finished_at=finished,
    )
    return str(minted)


def step_row(task_id: str) -> None:
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO steward_step (task_id, seq, name, kind, output, epoch, started_at, finished_at) "
            "VALUES (%s, 1, 's', 'step', '{\"secret\": 1}', 1, now(), now())",
            [task_id],
        )


def test_rows_land_in_their_days_partition(db):
    now = clock()
    row = audit_append(actor="user:alice", tenant="acme", kind=AuditKind.POOL_CREATED, data={"name": "p"})
    assert where_is("steward_audit", "id", row) == day_name("steward_audit", now)
    task = task_row(status="running", finished_days_ago=None)
    step_row(task)
    assert where_is("steward_step", "task_id", task) == day_name("steward_step", now)


def test_partitions_are_made_ahead_once_and_the_making_is_audited(db):
    now = travel(20)
    for table in PartitionedTable:
        assert {day_name(table, now + timedelta(days=d)) for d in range(8)} <= partitions(table), table
    assert partitions_ensure(actor="system:test") == []  # nothing left to make: nothing recorded
    made = AuditEvent.objects.filter(kind=AuditKind.PARTITIONS_ENSURED).order_by("-id")
    assert made.count() == 1
    assert day_name("steward_audit", now) in made[0].data["partitions"]


def test_a_days_rows_go_to_the_default_partition_when_its_partition_is_missing_and_are_still_read(db):
    set_clock_skew(400 * DAY)  # far past every partition made: no ensure
    row = audit_append(actor="user:alice", tenant="acme", kind=AuditKind.POOL_CREATED, data={"name": "p"})
    assert where_is("steward_audit", "id", row) == "steward_audit_default"
    assert audit_check(tenant="acme").ok
    # ...and that day's partition cannot be made over them: skipped, not an error.
    assert day_name("steward_audit", clock()) not in partitions_ensure(actor="system:test")


def test_only_partitions_wholly_before_the_cutoff_are_dropped_and_the_drop_is_audited(db):
    start = clock()
    now = travel(3)
    cutoff = midnight(now) - timedelta(days=1)  # the start of the day before "now"
    found = {
        d.partition: d.outcome for d in partitions_drop_before(table="steward_decision", cutoff=cutoff, actor="u:o")
    }

    gone = {
        "steward_decision_legacy",
        day_name("steward_decision", start),
        day_name("steward_decision", start + timedelta(days=1)),
    }
    assert found == dict.fromkeys(gone, "dropped")
    left = partitions("steward_decision")
    assert not gone & left
    assert {day_name("steward_decision", cutoff), day_name("steward_decision", now), "steward_decision_default"} <= left
    (event,) = AuditEvent.objects.filter(kind=AuditKind.PARTITION_DROPPED)
    assert sorted(event.data["dropped"]) == sorted(gone) and event.actor == "u:o"


def test_a_journal_partition_stays_while_a_task_in_its_range_is_unfinished_or_ended_after_the_cutoff(db):
    start = clock()
    live = task_row(status="running", finished_days_ago=None)
    step_row(live)
    travel(5)
    cutoff = midnight(clock()) - timedelta(days=1)
    mine = day_name("steward_step", start)

    def outcome():
        found = {
            d.partition: d.outcome for d in partitions_drop_before(table="steward_step", cutoff=cutoff, actor="u:o")
        }
        return found.get(mine)

    assert outcome() == "live_tasks"
    with connection.cursor() as cur:  # it ends, but after the cutoff: still inside retention
        cur.execute("UPDATE steward_task SET status = 'completed', finished_at = now() WHERE id = %s", [live])
    assert outcome() == "live_tasks"
    with connection.cursor() as cur:
        cur.execute("UPDATE steward_task SET finished_at = %s WHERE id = %s", [cutoff - timedelta(hours=1), live])
    assert outcome() == "dropped"
    assert mine not in partitions("steward_step")
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM steward_step WHERE task_id = %s", [live])
        assert cur.fetchone()[0] == 0


def test_a_decision_partition_a_kept_row_references_is_held_by_its_foreign_key(db):
    start = clock()
    task = task_row(status="running", finished_days_ago=None)
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO steward_decision (id, tenant, task_id, epoch, actor, owner, boundary, action, resource, "
            "allowed, reason_code, policy_version, authz_revision, at) VALUES (steward_uuid7(now()), 'acme', %s, 1, "
            "'agent:t.steps', 'user:alice', 'worker', 'a', 'r', false, 'no_grant_agent', '1', 0, now()) RETURNING id",
            [task],
        )
        decision = cur.fetchone()[0]
        cur.execute(
            "UPDATE steward_task SET status = 'blocked', blocked_reason = 'authority_denied', "
            "blocked_decision_id = %s WHERE id = %s",
            [decision, task],
        )
    travel(3)
    found = {
        d.partition: d.outcome
        for d in partitions_drop_before(table="steward_decision", cutoff=midnight(clock()), actor="u:o")
    }
    assert found[day_name("steward_decision", start)] == "referenced"
    assert where_is("steward_decision", "id", decision) == day_name("steward_decision", start)


def test_the_cutoff_must_be_an_aware_time_and_the_table_a_partitioned_one(db):
    with pytest.raises(TypeError):
        partitions_drop_before(table="steward_step", cutoff=datetime(2026, 1, 1), actor="u:o")
    with pytest.raises(ValueError):
        partitions_drop_before(table="steward_task", cutoff=datetime(2026, 1, 1, tzinfo=UTC), actor="u:o")


@pytest.fixture
def archived(db, tmp_path, monkeypatch):
    """A task chain and the tenant's chain with rows today, sealed; three days on, more
    rows in both chains; then everything before yesterday archived and dropped, read two
    rows a page (so the pages are stitched)."""
    monkeypatch.setattr(archive, "FETCH_ROWS", 2)
    task = uuid7()
    for n in range(3):
        audit_append(actor="user:alice", tenant="acme", kind=AuditKind.TASK_QUEUED, task_id=task, data={"n": n})
    audit_append(actor="user:alice", tenant="acme", kind=AuditKind.POOL_CREATED, data={"name": "p"})
    audit_seal_now()
    start = clock()
    travel(3)
    audit_append(actor="user:alice", tenant="acme", kind=AuditKind.TASK_QUEUED, task_id=task, data={"n": 3})
    audit_append(actor="user:alice", tenant="acme", kind=AuditKind.POOL_CREATED, data={"name": "q"})
    before = midnight(clock()) - timedelta(days=1)
    files, dropped = audit_archive(before=before, out=tmp_path, actor="user:ops")
    return {"task": task, "start": start, "files": files, "dropped": dropped, "dir": tmp_path}


def test_an_audit_partition_is_dropped_only_once_archived(db):
    travel(3)
    found = partitions_drop_before(table="steward_audit", cutoff=midnight(clock()), actor="u:o")
    assert found and {d.outcome for d in found} == {"not_archived"}


def test_archiving_writes_each_partition_with_its_seals_then_drops_it(archived):
    day = day_name("steward_audit", archived["start"])
    by_name = {a.partition: a for a in archived["files"]}
    assert by_name[day].rows >= 4 and by_name[day].seals >= 1
    assert {d.partition for d in archived["dropped"] if d.outcome == "dropped"} >= {day, "steward_audit_legacy"}
    assert day not in partitions("steward_audit")
    assert AuditEvent.objects.filter(kind=AuditKind.AUDIT_ARCHIVED, data__partition=day).exists()
    # Each chain's last archived row is its boundary: the task's chain continues live from #3.
    assert AuditBoundary.objects.get(chain=f"task:{archived['task']}").chain_seq == 3


def test_the_live_trail_still_verifies_after_the_drop_chains_starting_from_their_boundary(archived):
    check = audit_check()
    assert check.ok, (check.first_bad, check.seals)
    assert audit_problems(after_id=0) == []
    assert seal_problems() == []


def test_a_changed_boundary_is_found_by_the_live_verify(archived):
    bypassing_the_triggers(
        "UPDATE steward_audit_boundary SET hash = '\\x00'::bytea WHERE chain = %s", [f"task:{archived['task']}"]
    )
    assert [bad.problem for bad in audit_problems()] == ["link"]


def test_an_archive_verifies_standalone_and_names_a_changed_row(archived):
    check = audit_archive_verify(archived["dir"])
    assert check.ok, check.problems
    assert check.rows >= 4 and check.seals >= 1

    (path,) = [a.path for a in archived["files"] if a.partition == day_name("steward_audit", archived["start"])]
    lines = Path(path).read_text().splitlines()
    changed = []
    for line in lines:
        obj = json.loads(line)
        if "row" in obj and obj["row"]["chain_seq"] == 2 and obj["row"]["chain"].startswith("task:"):
            obj["row"]["actor"] = "user:mallory"
        changed.append(json.dumps(obj))
    Path(path).write_text("\n".join(changed) + "\n")
    problems = audit_archive_verify(path).problems
    assert len(problems) == 1 and "#2" in problems[0] and "hash" in problems[0]


def test_a_cut_archive_or_a_forged_seal_is_found(archived):
    (path,) = [a.path for a in archived["files"] if a.partition == day_name("steward_audit", archived["start"])]
    lines = Path(path).read_text().splitlines()
    Path(path).write_text("\n".join(lines[:-1]) + "\n")
    assert any("cut short" in p for p in audit_archive_verify(path).problems)

    forged = []
    for line in lines:
        obj = json.loads(line)
        if "seal" in obj:
            obj["seal"]["chains"] += 1
        forged.append(json.dumps(obj))
    Path(path).write_text("\n".join(forged) + "\n")
    assert any("not authentic" in p for p in audit_archive_verify(path).problems)
    assert any("not configured" in p for p in audit_archive_verify(path, keys={}).problems)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json\n",
        b'{"archive": "other/1"}\n',
        '{"archive": "steward-audit/1"}\n\udcff'.encode("utf-8", "surrogateescape"),
        b"[1, 2]\n" * 3,
    ],
)
def test_a_file_that_is_no_archive_is_refused_not_crashed_on(db, tmp_path, content):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    assert not audit_archive_verify(path).ok


def test_the_cli_archives_verifies_and_refuses_a_bad_date(db, tmp_path):
    travel(3)
    out = StringIO()
    call_command(
        "steward", "audit", "archive", "--before", f"{midnight(clock()):%Y-%m-%d}", "--out", str(tmp_path), stdout=out
    )
    assert "archived" in out.getvalue()
    out = StringIO()
    call_command("steward", "audit", "verify", "--archive", str(tmp_path), stdout=out)
    assert "audit archive verified" in out.getvalue()
    for bad in ("yesterday", "2026-13-01", "9" * 5000, "2026-01-01T00:00:00"):
        with pytest.raises(CommandError) as caught:
            call_command("steward", "audit", "archive", "--before", bad, "--out", str(tmp_path))
        assert caught.value.returncode == 2 and "INVALID_ARGUMENT" in str(caught.value)


def test_a_chain_quiet_for_days_continues_from_its_newest_row_in_an_older_partition(db):
    """The link trigger looks for a chain's tail in the last two days' partitions first,
    and everywhere only when that finds no row of the last day (migration 0032)."""
    task = uuid7()
    first = audit_append(actor="user:alice", tenant="acme", kind=AuditKind.TASK_QUEUED, task_id=task)
    second = audit_append(actor="user:alice", tenant="acme", kind=AuditKind.TASK_QUEUED, task_id=task)
    travel(1.5)  # the tail is in the two-day window but older than a day: the full search
    third = audit_append(actor="user:alice", tenant="acme", kind=AuditKind.TASK_QUEUED, task_id=task)
    travel(9)  # outside the window altogether
    fourth = audit_append(actor="user:alice", tenant="acme", kind=AuditKind.TASK_QUEUED, task_id=task)
    fifth = audit_append(actor="user:alice", tenant="acme", kind=AuditKind.TASK_QUEUED, task_id=task)
    rows = {r.id: r for r in AuditEvent.objects.filter(id__in=[first, second, third, fourth, fifth])}
    assert [rows[i].chain_seq for i in (first, second, third, fourth, fifth)] == [1, 2, 3, 4, 5]
    assert bytes(rows[fourth].prev_hash) == bytes(rows[third].hash)
    assert len({where_is("steward_audit", "id", i) for i in (first, third, fourth)}) == 3
    assert audit_check(tenant="acme").ok
