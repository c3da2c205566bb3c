-- Each chain's latest head sealed by a version 1 seal (chain_seq, hash), for verifying
-- only what came after (version 2 seals' heads are rows: runtime/trail/seals.py).
SELECT DISTINCT ON (h.key) h.key, (h.value ->> 0)::integer, decode(h.value ->> 1, 'hex')
FROM steward_audit_seal s CROSS JOIN LATERAL jsonb_each(s.heads) h
WHERE s.tenant = ANY(%(tenants)s)
ORDER BY h.key, s.seq DESC
