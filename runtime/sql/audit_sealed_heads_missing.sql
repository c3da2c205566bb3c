-- Chains whose latest head sealed by a version 1 seal (its heads in one JSON object,
-- before migration 0023) is no longer in the trail as it was sealed: the row at that
-- chain_seq is gone (the chain's newest rows, or the whole chain, were deleted) or holds
-- another hash. Each chain is checked at the head its most recent such seal names;
-- version 2 seals are checked by audit_seal_heads_check.sql.
WITH latest AS (
    SELECT DISTINCT ON (h.key) h.key AS chain, (h.value ->> 0)::integer AS seq,
           decode(h.value ->> 1, 'hex') AS hash, s.seq AS seal
    FROM steward_audit_seal s CROSS JOIN LATERAL jsonb_each(s.heads) h
    WHERE s.tenant = %(tenant)s
    ORDER BY h.key, s.seq DESC
)
SELECT l.chain, l.seq, l.seal, CASE WHEN a.id IS NULL THEN 'missing' ELSE 'changed' END AS what
FROM latest l LEFT JOIN steward_audit a ON a.chain = l.chain AND a.chain_seq = l.seq
-- archived and dropped (runtime/lifecycle/archive.py): checked in its archive
LEFT JOIN steward_audit_boundary b ON b.chain = l.chain AND b.chain_seq >= l.seq
WHERE (a.id IS NULL AND b.chain IS NULL) OR a.hash <> l.hash
ORDER BY l.chain
LIMIT 1000
