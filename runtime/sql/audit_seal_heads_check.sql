-- Verify's check of a tenant's version 2 seals (runtime/trail/seals.py seal_problems), a
-- batch of chains at a time after %(after)s: each chain's highest sealed head, read in
-- order off audit_seal_head_chain (no sort), and whether the trail still holds that row
-- with that hash. A row gone means the chain's newest rows, or the whole chain, were
-- deleted; another hash, that it was rewritten. Every head of the batch comes back, so
-- the caller knows where the next batch starts; `problem` is NULL for a sound one.
WITH latest AS (
    SELECT DISTINCT ON (h.chain) h.chain, h.chain_seq, h.hash, h.seal_id
    FROM steward_audit_seal_head h
    WHERE h.tenant = %(tenant)s AND h.chain > %(after)s
    ORDER BY h.chain, h.chain_seq DESC
    LIMIT %(limit)s
)
-- A head at or below its chain's boundary was archived with its partition and dropped
-- (runtime/lifecycle/archive.py): `audit verify --archive` checks it there; the boundary
-- row itself must still carry the sealed hash.
SELECT l.chain, l.chain_seq, s.seq,
       CASE WHEN a.id IS NULL AND b.chain_seq IS NOT NULL AND b.chain_seq >= l.chain_seq
                 THEN CASE WHEN b.chain_seq = l.chain_seq AND b.hash <> l.hash THEN 'changed' END
            WHEN a.id IS NULL THEN 'missing' WHEN a.hash <> l.hash THEN 'changed' END AS what
FROM latest l
JOIN steward_audit_seal s ON s.id = l.seal_id
LEFT JOIN steward_audit a ON a.chain = l.chain AND a.chain_seq = l.chain_seq
LEFT JOIN steward_audit_boundary b ON b.chain = l.chain
ORDER BY l.chain
