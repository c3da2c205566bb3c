-- The seal check (runtime/trail/seals.py audit_seal), on every supervisor's look: each
-- tenant with audit events (a loose index scan of audit_tenant_at, as audit_tenants.sql)
-- whose latest seal is older than %(every)s seconds, or never sealed, or `behind` (its
-- last scan of the trail stopped at its bound). It reads the latest seal's sealed_at and
-- behind off audit_seal_one_per_seq and nothing else: a version 1 seal's heads (9.7 MB
-- over 100,000 chains) were read whole here, 205 ms a tenant (issue 20). Oldest first, so
-- a look that runs out of time leaves the most recently sealed for the next one.
WITH RECURSIVE t AS (
    (SELECT a.tenant FROM steward_audit a ORDER BY a.tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT a.tenant FROM steward_audit a WHERE a.tenant > t.tenant ORDER BY a.tenant LIMIT 1)
    FROM t WHERE t.tenant IS NOT NULL
)
SELECT t.tenant
FROM t
LEFT JOIN LATERAL (
    SELECT s.sealed_at, s.behind FROM steward_audit_seal s WHERE s.tenant = t.tenant ORDER BY s.seq DESC LIMIT 1
) latest ON true
WHERE t.tenant IS NOT NULL
  AND (latest.sealed_at IS NULL OR latest.behind
       OR latest.sealed_at <= now() - make_interval(secs => %(every)s::float8))
ORDER BY latest.sealed_at NULLS FIRST, t.tenant
