"""`audit verify` streams: each chain in (chain, chain_seq) order off its index, in
batches that carry the previous row's hash across the boundary, with no sort. The
verdicts (which row, which problem) are the ones tests/runtime/test_audit.py pins
down, whatever the batch size; verify can start after an audit id, or from a chain's
known-good head (a seal), and reports its progress.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from runtime.db import sql
from runtime.models import AuditEvent
from runtime.trail import services as audit_module
from runtime.trail.services import Tampered, audit_problems, audit_verify
from tests.plans import explain, node_types, rows_read
from tests.runtime.inprocess import run, submit
from tests.tamper import bypassing_the_triggers


@pytest.fixture
def trail(live):
    """Four completed tasks (three rows each) and one sleeping (three more), their rows
    interleaved by id: 15 rows in five chains, and the default pool's creation on first use
    (pool.created, in the system chain): 16 rows in six."""
    ids = [submit("t.steps", {"n": 1}) for _ in range(4)] + [submit("t.sleeper", {"seconds": 3600})]
    run()
    rows = list(AuditEvent.objects.order_by("chain", "chain_seq"))
    assert len(rows) == 16 and len({r.chain for r in rows}) == 6
    assert audit_verify() is None
    return ids, rows


TAMPERINGS = {
    "altered": ("UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %s", "hash", 0),
    "deleted": ("DELETE FROM steward_audit WHERE id = %s", "gap", 1),
    "rehashed": (
        "UPDATE steward_audit SET data = '{\"epoch\": 7}'::jsonb, hash = steward_audit_hash("
        "prev_hash, chain, chain_seq, at, actor, tenant, task_id, kind, '{\"epoch\": 7}'::jsonb) "
        "WHERE id = %s",
        "link",
        1,
    ),
}


@pytest.mark.parametrize("tampering", sorted(TAMPERINGS))
def test_every_batch_size_names_the_same_row_wherever_the_tampering_falls(trail, tampering):
    """Batches of 1 to 4 rows and one batch of all: with each tampered position a batch
    boundary falls before it, after it or around it at least once."""
    _, rows = trail
    statement, problem, reported = TAMPERINGS[tampering]
    for position in (1, 4, 7):  # inside chains of the stream; the verdict is about the row after a deletion
        victim, expected = rows[position], rows[position + reported]
        bypassing_the_triggers(statement, [victim.id])
        try:
            want = {Tampered(expected.id, expected.chain, expected.chain_seq, problem)}
            for batch in (1, 2, 3, 4, 1000):
                assert set(audit_problems(batch=batch)) == want, (tampering, position, batch)
        finally:
            restore(victim)


def restore(row: AuditEvent) -> None:
    """Put the row back exactly as it was (the trigger would re-link it, so bypass it)."""
    bypassing_the_triggers("DELETE FROM steward_audit WHERE id = %s", [row.id])
    bypassing_the_triggers(
        "INSERT INTO steward_audit (id, chain, chain_seq, at, actor, tenant, task_id, kind, data, prev_hash, hash) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s)",
        [
            row.id,
            row.chain,
            row.chain_seq,
            row.at,
            row.actor,
            row.tenant,
            row.task_id,
            row.kind,
            __import__("json").dumps(row.data),
            bytes(row.prev_hash),
            bytes(row.hash),
        ],
    )
    assert audit_verify() is None


def test_the_batch_statement_reads_its_rows_off_the_index_without_a_sort(db):
    with connection.cursor() as cur:  # 20,000 rows in 2,000 chains, unlinked: only the plan matters here
        cur.execute("ALTER TABLE steward_audit DISABLE TRIGGER steward_audit_link")
        cur.execute("""
            INSERT INTO steward_audit (chain, chain_seq, at, actor, tenant, kind, data, prev_hash, hash)
            SELECT 'task:' || md5((g % 2000)::text), g / 2000 + 1, now(), 'a', 't', 'k', '{}', '', ''
            FROM generate_series(0, 19999) g""")
        cur.execute("ALTER TABLE steward_audit ENABLE TRIGGER steward_audit_link")
        cur.execute("ANALYZE steward_audit")
    start = {"chain": "task:8", "seq": 3, "hash": b"", "last_chain": "~", "limit": 500, "tenant": None}

    for tenant in (None, "t"):  # one tenant's verify reads the same range, filtered
        plan = explain(sql("audit_verify_batch"), {**start, "tenant": tenant})

        assert "Sort" not in node_types(plan), plan
        assert rows_read(plan, "steward_audit") == 500


def test_verify_after_an_id_checks_only_later_rows_each_linked_to_the_row_before_it(trail):
    _, rows = trail
    by_id = sorted(rows, key=lambda r: r.id)
    point = by_id[6].id
    before, after = by_id[2], by_id[9]
    bypassing_the_triggers(
        "UPDATE steward_audit SET actor = 'user:mallory' WHERE id IN (%s, %s)", [before.id, after.id]
    )

    assert audit_verify(after_id=point, batch=2) == Tampered(after.id, after.chain, after.chain_seq, "hash")
    assert {bad.id for bad in audit_problems()} == {before.id, after.id}  # a full verify sees both


def test_verify_after_an_id_names_the_row_whose_predecessor_before_the_point_was_removed(trail):
    _, rows = trail
    chain_rows = [r for r in rows if r.chain == rows[0].chain]
    removed, orphan = chain_rows[1], chain_rows[2]
    bypassing_the_triggers("DELETE FROM steward_audit WHERE id = %s", [removed.id])

    assert audit_verify(after_id=orphan.id - 1, batch=3) == Tampered(orphan.id, orphan.chain, 3, "gap")
    assert audit_verify(after_id=orphan.id) is None


def test_verify_from_a_known_head_reads_only_the_rows_after_it_and_links_the_first(trail):
    _, rows = trail
    first_chain = [r for r in rows if r.chain == rows[0].chain]
    head, later = first_chain[0], first_chain[1]
    sealed = {head.chain: (head.chain_seq, bytes(head.hash))}
    bypassing_the_triggers("UPDATE steward_audit SET actor = 'user:mallory' WHERE id = %s", [head.id])

    # The sealed head is trusted, not re-read: the rows after it still link to it.
    assert audit_verify(starts=sealed, batch=1) is None
    assert audit_verify() == Tampered(head.id, head.chain, 1, "hash")
    # A head that does not match what the chain says: the next row's link breaks.
    forged = {head.chain: (head.chain_seq, b"\0" * 32)}
    assert audit_verify(starts=forged) == Tampered(later.id, later.chain, 2, "link")


def test_progress_is_reported_after_each_batch(trail):
    heard = []
    audit_verify(batch=4, progress=heard.append, streams=1)

    assert [p.rows for p in heard] == [4, 8, 12, 16]
    assert all(p.seconds >= 0 and p.rows_per_second >= 0 for p in heard)


def test_the_cli_verifies_after_an_id_and_reports_progress_on_stderr(trail):
    _, rows = trail
    out, err = io.StringIO(), io.StringIO()
    call_command("steward", "audit", "verify", stdout=out, stderr=err)
    assert out.getvalue().startswith("audit trail verified: every chain is intact, and so is every seal (16 rows in ")

    last = max(r.id for r in rows)
    out = io.StringIO()
    call_command("steward", "audit", "verify", "--after", str(last - 3), stdout=out, stderr=io.StringIO())
    assert out.getvalue().startswith(f"audit trail verified: every row after #{last - 3} is intact (3 rows in ")

    bypassing_the_triggers("UPDATE steward_audit SET kind = 'forged' WHERE id = %s", [last])
    with pytest.raises(CommandError) as failed:
        call_command("steward", "audit", "verify", "--after", str(last - 3), stdout=io.StringIO(), stderr=io.StringIO())
    assert failed.value.returncode == 3 and f"audit row {last} " in str(failed.value)


def test_rows_written_before_the_bytea_migration_verify_unchanged(live):
    """The hash input keeps the previous hash as hex, so a row hashed by migration 0002's
    function (64 hex characters) carries the same 32 bytes after 0006 converted it."""
    with connection.cursor() as cur:
        cur.execute("""
            SELECT encode(sha256(convert_to(concat_ws(E'\\x1f', '', 'tenant:x', '1',
                       (extract(epoch FROM timestamptz '2026-11-29 10:00:00+00') * 1000000)::bigint::text,
                       'user:a', 'x', '', 'k', '{}'), 'UTF8')), 'hex'),
                   steward_audit_hash(''::bytea, 'tenant:x', 1, timestamptz '2026-11-29 10:00:00+00', 'user:a',
                                      'x', NULL, 'k', '{}'::jsonb)""")
        old_hex, new_bytes = cur.fetchone()
    assert bytes(new_bytes).hex() == old_hex


def test_chain_ranges_verified_at_once_find_tampering_on_either_side_of_each_cut(trail, monkeypatch):
    """Three streams cut between chains (the sample that picks real cuts is patched to
    name them): the last row before a cut and the first after it are both checked."""
    _, rows = trail
    chains = sorted({r.chain for r in rows})
    real = audit_module.db.fetchone
    monkeypatch.setattr(
        audit_module.db,
        "fetchone",
        lambda name, params=(), *, row=None: (
            row(cuts=[chains[1], chains[3]]) if name == "audit_chain_cuts" else real(name, params, row=row)
        ),
    )
    assert [(a, b) for a, _, _, b in audit_module._chain_ranges(3)] == [
        ("", chains[1]),
        (chains[1], chains[3]),
        (chains[3], chains[-1]),
    ]
    last_before = max((r for r in rows if r.chain == chains[1]), key=lambda r: r.chain_seq)
    first_after = min((r for r in rows if r.chain == chains[2]), key=lambda r: r.chain_seq)
    bypassing_the_triggers(
        "UPDATE steward_audit SET actor = 'user:mallory' WHERE id IN (%s, %s)", [last_before.id, first_after.id]
    )

    heard = []
    found = audit_problems(streams=3, batch=2, progress=heard.append)

    assert {bad.id for bad in found} == {last_before.id, first_after.id}
    assert heard[-1].rows == 16  # every row, once, across the three streams
