-- Every tenant that has audit events, one index probe per tenant on audit_tenant_at
-- (a loose index scan: the trail has millions of rows and a handful of tenants).
WITH RECURSIVE t AS (
    (SELECT a.tenant FROM steward_audit a ORDER BY a.tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT a.tenant FROM steward_audit a WHERE a.tenant > t.tenant ORDER BY a.tenant LIMIT 1)
    FROM t WHERE t.tenant IS NOT NULL
)
SELECT tenant FROM t WHERE tenant IS NOT NULL
