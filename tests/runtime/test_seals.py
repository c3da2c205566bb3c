"""Audit seals (runtime/trail/seals.py): what the hash chains alone cannot show.

Deleting a chain's newest rows, or a whole task's chain, leaves every remaining link
intact, so the chain verify passes; the seal still names the head that must be there.
A seal cannot be forged or dropped from the middle without the key, and racing
supervisors make one seal per tenant, never two.
"""

from __future__ import annotations

import io
import json
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from runtime.audit import audit_append
from runtime.models import AuditEvent, AuditSeal
from runtime.trail.seals import audit_seal, merkle_root, seal_heads, seal_problems, sealed_heads
from runtime.trail.services import audit_check, audit_problems
from tests.harness import race
from tests.runtime.inprocess import run, submit
from tests.tamper import bypassing_the_triggers


@pytest.fixture
def sealed(live):
    """Three completed tasks in tenant acme, sealed once."""
    ids = [submit("t.steps", {"n": 1}) for _ in range(3)]
    run()
    made = audit_seal(every=0)
    assert [(s.tenant, s.seq) for s in made] == [("acme", 1), ("system", 1)]
    assert seal_problems() == [] and audit_problems() == []
    return ids


def _chain_rows(task_id) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(task_id=task_id).order_by("chain_seq"))


def _heads(seal: AuditSeal) -> dict:
    """{chain: [chain_seq, hash as hex]}: what the seal names, as version 1 wrote it."""
    return {chain: [n, digest.hex()] for chain, n, digest in seal_heads(seal)}


def test_a_seal_names_the_head_of_every_chain_that_moved(sealed):
    (seal,) = AuditSeal.objects.filter(tenant="acme")
    for task_id in sealed:
        head = _chain_rows(task_id)[-1]
        assert _heads(seal)[head.chain] == [head.chain_seq, bytes(head.hash).hex()]
    assert (seal.version, seal.heads, seal.chains) == (2, None, len(_heads(seal)))
    assert bytes(seal.root) == merkle_root(seal_heads(seal))
    assert sealed_heads(tenants=["acme"])[f"task:{sealed[0]}"][0] == _chain_rows(sealed[0])[-1].chain_seq


def test_deleting_a_chains_newest_row_passes_the_links_but_not_the_seal(sealed):
    newest = _chain_rows(sealed[1])[-1]
    bypassing_the_triggers("DELETE FROM steward_audit WHERE id = %s", [newest.id])

    assert audit_problems() == []  # every remaining link holds: the tail is simply gone
    (problem,) = seal_problems()
    assert (problem.problem, problem.chain, problem.chain_seq, problem.seal) == (
        "missing",
        newest.chain,
        newest.chain_seq,
        1,
    )
    assert "is gone" in str(problem)


def test_deleting_a_whole_chain_is_named_by_the_seal(sealed):
    bypassing_the_triggers("DELETE FROM steward_audit WHERE task_id = %s", [sealed[2]])

    assert audit_problems() == []
    assert [(p.problem, p.chain) for p in seal_problems()] == [("missing", f"task:{sealed[2]}")]


def test_a_sealed_head_rewritten_with_a_fresh_hash_is_named(sealed):
    head = _chain_rows(sealed[0])[-1]
    bypassing_the_triggers(
        "UPDATE steward_audit SET data = '{\"epoch\": 9}'::jsonb, hash = steward_audit_hash("
        "prev_hash, chain, chain_seq, at, actor, tenant, task_id, kind, '{\"epoch\": 9}'::jsonb) "
        "WHERE id = %s",
        [head.id],
    )

    assert [(p.problem, p.chain_seq) for p in seal_problems()] == [("changed", head.chain_seq)]


def test_a_forged_seal_and_a_seal_dropped_from_the_middle_are_named(sealed):
    submit("t.steps", {"n": 1})
    run()
    audit_seal(every=0)
    submit("t.steps", {"n": 1})
    run()
    audit_seal(every=0)
    assert list(AuditSeal.objects.filter(tenant="acme").values_list("seq", flat=True).order_by("seq")) == [1, 2, 3]

    bypassing_the_triggers("UPDATE steward_audit_seal SET chains = 0 WHERE tenant = 'acme' AND seq = 3")
    assert [p.detail for p in seal_problems(tenant="acme")] == [
        "seal #3 is not authentic: its MAC does not match its content"
    ]

    bypassing_the_triggers("DELETE FROM steward_audit_seal WHERE tenant = 'acme' AND seq = 2")
    details = [p.detail for p in seal_problems(tenant="acme")]
    assert "seals #2 to #2 are missing" in details
    assert "seal #3 does not link to the seal before it" in details


def test_seals_refuse_update_and_delete(sealed):
    from django.db import DatabaseError

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditSeal.objects.filter(tenant="acme").update(heads={})
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditSeal.objects.filter(tenant="acme").delete()


def test_a_seal_made_with_a_key_no_longer_configured_is_named_and_an_old_key_checks_it(sealed, settings):
    old = settings.STEWARD["AUDIT_SEAL_KEYS"]
    settings.STEWARD = {**settings.STEWARD, "AUDIT_SEAL_KEYS": [b"n" * 32]}
    assert {p.problem for p in seal_problems()} == {"seal"}
    assert all("not configured" in p.detail for p in seal_problems())
    settings.STEWARD = {**settings.STEWARD, "AUDIT_SEAL_KEYS": [b"n" * 32, *old]}
    assert seal_problems() == []


def test_nothing_moved_means_no_new_seal_and_a_recent_seal_is_not_repeated(sealed):
    assert audit_seal(every=0) == []  # no chain moved since the last seal
    submit("t.steps", {"n": 1})
    run()
    assert audit_seal(every=3600) == []  # moved, but the last seal is not an hour old
    assert [s.seq for s in audit_seal(every=0) if s.tenant == "acme"] == [2]


def test_racing_supervisors_make_one_seal_per_tenant(live):
    submit("t.steps", {"n": 1})
    run()
    for round_ in range(1, 11):
        audit_append(actor="user:alice", tenant="acme", kind="test.moved", data={"round": round_})
        results = race(6, lambda i: len(audit_seal(every=0)))
        assert not [r for r in results if isinstance(r, Exception)], results
        assert AuditSeal.objects.filter(tenant="acme").count() == round_
    assert seal_problems() == []


def test_an_event_that_commits_after_a_seal_it_began_before_is_covered_by_the_next(live, settings):
    """`at` is when an event's transaction began; the next seal's window reaches back
    far enough to cover one that committed late."""
    submit("t.steps", {"n": 1})
    run()
    audit_seal(every=0)
    written, release = threading.Event(), threading.Event()

    def slow_writer():
        try:
            with transaction.atomic():
                audit_append(actor="user:alice", tenant="acme", kind="test.late", data={})
                written.set()
                release.wait(10)
        finally:
            connection.close()

    writer = threading.Thread(target=slow_writer)
    writer.start()
    assert written.wait(10)
    submit("t.steps", {"n": 1})  # something else moved, so this seal is made
    run()
    (meanwhile,) = [s for s in audit_seal(every=0) if s.tenant == "acme"]
    assert "tenant:acme" not in _heads(meanwhile)  # it cannot see the uncommitted event
    release.set()
    writer.join(10)
    late = AuditEvent.objects.get(kind="test.late")
    audit_seal(every=0)
    latest = AuditSeal.objects.filter(tenant="acme").order_by("-seq").first()
    assert latest.seq == meanwhile.seq + 1
    assert _heads(latest).get(late.chain) == [late.chain_seq, bytes(late.hash).hex()]
    assert seal_problems() == []


def test_a_tenants_check_walks_only_its_own_chains_and_seals(sealed):
    other = submit("t.steps", {"n": 1}, tenant="globex")
    run()
    audit_seal(every=0)
    theirs = _chain_rows(other)[-1]
    bypassing_the_triggers("DELETE FROM steward_audit WHERE id = %s", [theirs.id])

    acme = audit_check(tenant="acme")
    assert acme.ok and acme.rows == AuditEvent.objects.filter(tenant="acme").count()
    globex = audit_check(tenant="globex")
    assert not globex.ok and [(p.problem, p.chain) for p in globex.seals] == [("missing", theirs.chain)]
    assert not audit_check().ok  # every tenant's


def test_the_cli_seals_now_exports_the_seals_and_verify_names_a_missing_sealed_row(sealed):
    newest = _chain_rows(sealed[0])[-1]
    out = io.StringIO()
    call_command("steward", "audit", "seals", "--tenant", "acme", stdout=out)
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(s["tenant"], s["seq"], s["version"]) for s in exported] == [("acme", 1, 2)]
    (seal,) = AuditSeal.objects.filter(tenant="acme")
    assert _heads(seal)[newest.chain] == [newest.chain_seq, bytes(newest.hash).hex()]
    assert (exported[0]["root"], exported[0]["chains"]) == (merkle_root(seal_heads(seal)).hex(), seal.chains)
    assert "heads" not in exported[0]  # a version 2 seal's heads stay in the database; the root covers them

    bypassing_the_triggers("DELETE FROM steward_audit WHERE id = %s", [newest.id])
    with pytest.raises(CommandError) as refused:
        call_command("steward", "audit", "verify", "--tenant", "acme", stdout=io.StringIO())
    assert refused.value.returncode == 3 and f"SEAL: audit chain {newest.chain} of acme" in str(refused.value)

    submit("t.steps", {"n": 1})
    run()
    out = io.StringIO()
    call_command("steward", "audit", "seal", stdout=out)
    assert out.getvalue().startswith("sealed 1 tenant(s)\n  acme seal #2")
