"""Bounded audit seals (runtime/trail/seals.py, docs/adr/0028-bounded-audit-seals.md).

Issue 20, probed at 1M finished tasks: every seal check read each tenant's whole latest
seal (a 9.7 MB JSON of heads) to compare its date, and the first seal after a burst read a
million rows and wrote 10 MB into one row. Now the check reads one small row per
tenant, a seal reads at most 2 × SEAL_ROWS audit rows and names at most as many heads
(kept as rows under a Merkle root its MAC covers), a trail further behind is sealed in
as many bounded seals as it takes, and seals made before the change still verify.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime

import pytest
from django.db import DatabaseError, connection, transaction

from runtime import config, db
from runtime.models import AuditEvent, AuditSeal, AuditSealHead
from runtime.trail import seals
from runtime.trail.seals import audit_seal, audit_seal_now, seal_heads, seal_problems, sealed_heads
from runtime.trail.selectors import audit_tenants
from runtime.trail.services import audit_check, audit_problems
from tests.plans import explain, rows_read
from tests.runtime.inprocess import run, submit
from tests.tamper import bypassing_the_triggers


def _heads_now(tenant: str = "acme") -> dict:
    """Every chain of the tenant and its newest row, (chain_seq, hash), from the trail."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT ON (chain) chain, chain_seq, hash FROM steward_audit WHERE tenant = %s "
            "ORDER BY chain, chain_seq DESC",
            [tenant],
        )
        return {chain: (n, bytes(digest)) for chain, n, digest in cur.fetchall()}


@pytest.fixture
def settled_at_once(monkeypatch):
    """Every row counts as settled at once (a horizon of zero leases), so a test needs
    no minute-old rows to exercise the settled scan; and a tiny row bound per scan."""
    monkeypatch.setattr(seals, "LOOKBACK_LEASES", 0)
    monkeypatch.setattr(seals, "SEAL_ROWS", 7)


def test_a_trail_far_behind_is_sealed_in_bounded_seals_that_together_name_every_head(live, settled_at_once):
    for _ in range(10):
        submit("t.steps", {"n": 1})
    run()
    rows = AuditEvent.objects.filter(tenant="acme").count()
    assert rows > 4 * seals.SEAL_ROWS

    (first,) = [s for s in audit_seal(every=0) if s.tenant == "acme"]
    assert first.behind and 0 < first.chains <= 2 * seals.SEAL_ROWS

    made = [s for s in audit_seal_now() if s.tenant == "acme"]
    assert all(s.chains <= 2 * seals.SEAL_ROWS for s in made)
    assert not made[-1].behind and len(made) >= rows // seals.SEAL_ROWS - 1
    assert {chain: head for chain, head in sealed_heads(tenants=["acme"]).items()} == _heads_now()
    assert seal_problems() == [] and audit_problems() == []

    # Sealed in pieces, a deleted newest row is still named.
    victim = AuditEvent.objects.filter(tenant="acme", task_id__isnull=False).order_by("-id").first()
    bypassing_the_triggers("DELETE FROM steward_audit WHERE id = %s", [victim.id])
    assert [(p.problem, p.chain, p.chain_seq) for p in seal_problems(tenant="acme")] == [
        ("missing", victim.chain, victim.chain_seq)
    ]


def _row_bytes(tenant: str = "acme") -> int:
    """The size of the tenant's latest seal row, as stored: what every check used to read."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pg_column_size(s.*) FROM steward_audit_seal s WHERE tenant = %s ORDER BY seq DESC LIMIT 1",
            [tenant],
        )
        return cur.fetchone()[0]


def test_a_seal_row_is_the_same_size_however_many_chains_moved(live):
    """Issue 20: a seal carried every moved head in its own row, 9.7 MB for 100,000
    chains, which every check read whole. Through the public API only, so that the
    test reads the same before and after the change."""
    submit("t.steps", {"n": 1})
    run()
    audit_seal(every=0)
    one = _row_bytes()
    for _ in range(150):
        submit("t.steps", {"n": 1})
    run()
    audit_seal(every=0)
    many = _row_bytes()
    assert many <= one + 64, (one, many)  # a few bytes of position and count, not 150 heads


def test_making_a_seal_reads_at_most_twice_its_row_bound_however_long_the_trail(live, settled_at_once):
    for _ in range(10):
        submit("t.steps", {"n": 1})
    run()
    params = {
        "tenant": "acme",
        "after_at": datetime(1, 1, 1, tzinfo=db.clock().tzinfo),
        "after_id": 0,
        "horizon": db.clock(),
        "rows": seals.SEAL_ROWS,
    }
    plan = explain(db.sql("audit_seal_heads"), params, as_if_large=True)
    assert rows_read(plan, "steward_audit") <= 2 * seals.SEAL_ROWS, plan
    assert AuditEvent.objects.filter(tenant="acme").count() > 4 * seals.SEAL_ROWS


def test_the_check_reads_each_tenants_latest_seal_row_and_never_its_heads(live):
    for tenant in ("acme", "globex"):
        submit("t.steps", {"n": 1}, tenant=tenant)
    run()
    audit_seal(every=0)
    for tenant in ("acme", "globex"):
        submit("t.steps", {"n": 1}, tenant=tenant)
    run()
    audit_seal(every=0)  # two seals each: the check must read only the latest
    statement = db.sql("audit_seal_due")
    assert "heads" not in statement.split("--")[-1] and "s.heads" not in statement
    plan = explain(statement, {"every": 3600})
    tenants = len(audit_tenants())
    assert rows_read(plan, "steward_audit_seal") == tenants, plan
    assert audit_seal(every=3600) == []


def test_a_looks_budget_stops_making_seals_and_leaves_the_rest_due_for_the_next(live):
    for tenant in ("acme", "globex"):
        submit("t.steps", {"n": 1}, tenant=tenant)
    run()
    tenants = len(audit_tenants())  # acme, globex and system (the pools')
    looks = [audit_seal(every=3600, budget=0) for _ in range(tenants + 1)]
    # One seal a look, each of a tenant never sealed before (they are due first), then none due.
    assert [len(made) for made in looks] == [1] * tenants + [0]
    assert len({made[0].tenant for made in looks[:-1]}) == tenants


def test_a_head_row_removed_or_changed_no_longer_hashes_to_its_seals_root(live):
    for _ in range(3):
        submit("t.steps", {"n": 1})
    run()
    (seal,) = [s for s in audit_seal(every=0) if s.tenant == "acme"]
    head = AuditSealHead.objects.filter(seal_id=seal.id).order_by("chain").first()

    bypassing_the_triggers("UPDATE steward_audit_seal_head SET hash = '\\x00'::bytea WHERE id = %s", [head.id])
    assert [p.detail for p in seal_problems(tenant="acme")] == [
        f"seal #{seal.seq}'s chain heads no longer hash to its root ({seal.chains} rows for {seal.chains} heads): "
        "a head was removed, added or changed",
        f"row #{head.chain_seq} no longer has the hash seal #{seal.seq} recorded",  # nor does the trail match it
    ]
    bypassing_the_triggers("DELETE FROM steward_audit_seal_head WHERE id = %s", [head.id])
    assert f"({seal.chains - 1} rows for {seal.chains} heads)" in seal_problems(tenant="acme")[0].detail


def test_head_rows_refuse_update_and_delete(live):
    submit("t.steps", {"n": 1})
    run()
    audit_seal(every=0)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditSealHead.objects.update(chain_seq=1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditSealHead.objects.all().delete()


# --- seals made before the change (version 1) -----------------------------------------------


def _version_1_mac(key: bytes, *, tenant, seq, sealed_at, heads, prev_mac, key_id) -> bytes:
    """The MAC version 1 seals carry, exactly as runtime/trail/seals.py made it before
    migration 0023 (copied, so that a change to today's code cannot pass for it)."""
    body = json.dumps(
        {
            "tenant": tenant,
            "seq": seq,
            "sealed_at": round(sealed_at.timestamp() * 1_000_000),
            "heads": heads,
            "prev_mac": prev_mac.hex(),
            "key_id": key_id,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hmac.new(key, body.encode(), hashlib.sha256).digest()


def _a_version_1_seal(tenant: str = "acme") -> AuditSeal:
    key_id, key = config.audit_seal_keys()[0]
    heads = {chain: [n, digest.hex()] for chain, (n, digest) in _heads_now(tenant).items()}
    sealed_at = db.clock()
    mac = _version_1_mac(key, tenant=tenant, seq=1, sealed_at=sealed_at, heads=heads, prev_mac=b"", key_id=key_id)
    return AuditSeal.objects.create(
        tenant=tenant, seq=1, sealed_at=sealed_at, heads=heads, key_id=key_id, prev_mac=b"", mac=mac
    )


def test_a_version_1_seal_still_verifies_and_the_next_seal_links_to_it(live):
    ids = [submit("t.steps", {"n": 1}) for _ in range(3)]
    run()
    old = _a_version_1_seal()
    assert old.version == 1 and seal_problems(tenant="acme") == []

    submit("t.steps", {"n": 1})
    run()
    (new,) = [s for s in audit_seal(every=0) if s.tenant == "acme"]
    assert (new.seq, new.version, bytes(new.prev_mac)) == (2, 2, bytes(old.mac))
    assert audit_check(tenant="acme").ok

    # What the version 1 seal names is still checked: a whole chain deleted. (The version
    # 2 seal names it too: its fresh scan read the chain's rows of the last two leases.)
    bypassing_the_triggers("DELETE FROM steward_audit WHERE task_id = %s", [ids[0]])
    assert [(p.problem, p.chain, p.seal) for p in seal_problems(tenant="acme")] == [
        ("missing", f"task:{ids[0]}", 1),
        ("missing", f"task:{ids[0]}", 2),
    ]
    # And its MAC still covers its heads.
    bypassing_the_triggers("UPDATE steward_audit_seal SET heads = '{}'::jsonb WHERE id = %s", [old.id])
    assert "seal #1 is not authentic: its MAC does not match its content" in [
        p.detail for p in seal_problems(tenant="acme")
    ]


def test_after_a_version_1_seal_the_settled_scan_starts_a_lookback_before_it(live):
    submit("t.steps", {"n": 1})
    run()
    old = _a_version_1_seal()
    submit("t.steps", {"n": 1})
    run()
    (new,) = [s for s in audit_seal(every=0) if s.tenant == "acme"]
    # Nothing is settled yet (every row is newer than the horizon): the position it keeps
    # is where the version 1 seal left the trail covered.
    assert new.through_at == old.sealed_at - seals._lookback() and new.through_id == 0
    assert seal_heads(new) and seal_problems() == []
