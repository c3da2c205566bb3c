"""A grant's history reads its own events off audit_grant_events (migration 0023),
however large its tenant's trail: issue 20 found it read by a JSON field with no index,
so it walked every audit row of the tenant (audit_tenant_at) to find a grant's three."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from runtime.authz.selectors import grant_history
from runtime.authz.services import grant_narrow, grant_revoke
from tests.plans import explain, rows_read
from tests.runtime.authz.common import ADMIN, give
from tests.tamper import bypassing_the_triggers

OTHER_EVENTS = 20_000


def _a_long_trail(tenant: str, n: int) -> None:
    """`n` task events of the tenant, written set-wise (the link trigger off: their
    hashes are not what this test reads), spread over the last day."""
    bypassing_the_triggers(
        """
        INSERT INTO steward_audit (chain, chain_seq, at, actor, tenant, task_id, kind, data, prev_hash, hash)
        SELECT 'task:' || g, 1, now() - g * interval '1 s', 'user:alice', %s, NULL, 'task.submitted',
               jsonb_build_object('grant', g), '', ''
        FROM generate_series(1, %s) g""",
        [tenant, n],
    )
    with connection.cursor() as cur:
        cur.execute("ANALYZE steward_audit")


def test_a_grants_history_reads_its_own_events_however_long_the_tenants_trail(db):
    grant = give("agent:t.steps", resource="repo:acme/*")
    grant_narrow(grant_id=grant.id, tenant="acme", resource="repo:acme/x/*", actor=ADMIN, reason="narrower")
    grant_revoke(grant_id=grant.id, tenant="acme", actor=ADMIN, reason="gone")
    # Other grants' events, and task events whose data even carries a `grant` key.
    for i in range(5):
        give(f"agent:other-{i}")
    _a_long_trail("acme", OTHER_EVENTS)

    assert [e.kind for e in grant_history(grant)] == ["grant.created", "grant.narrowed", "grant.revoked"]

    with CaptureQueriesContext(connection) as ran:
        grant_history(grant)
    (statement,) = [q["sql"] for q in ran.captured_queries]
    plan = explain(statement)
    assert rows_read(plan, "steward_audit") <= 3, plan
    # By audit_grant_events on the partition that holds the 20,000 (migration 0032: a
    # daily partition's copy of the index is named after the partition; empty partitions
    # may be scanned whole, reading nothing): three rows read of the tenant's trail.
    assert "Index" in str(plan), plan
