-- The head (last chain_seq, its hash) of every chain of a tenant with an event at or
-- after %(since)s: the chains a new seal must cover. Read off audit_tenant_at as one
-- range. `since` reaches back past the previous seal by more than any transaction can
-- last (runtime/trail/seals.py), so an event that committed late is still covered.
SELECT DISTINCT ON (a.chain) a.chain, a.chain_seq, a.hash
FROM steward_audit a
WHERE a.tenant = %(tenant)s AND a.at >= %(since)s
ORDER BY a.chain, a.chain_seq DESC
