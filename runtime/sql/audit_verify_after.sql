-- One batch of `audit verify --after ID`: the next %(limit)s rows with id > %(after)s, in
-- id order off the primary key, each checked against its own hash and against the row
-- before it in its chain, found by (chain, chain_seq - 1) in audit_chain_seq whether or
-- not that row is itself after the point. The same verdicts as audit_verify_batch.sql:
-- 'hash' (content changed), 'gap' (the row before it is missing), 'link' (the row
-- before it changed). Returned: every bad row, and the batch's last row and size.
SELECT id, chain, chain_seq, problem, last, n
FROM (
    SELECT id, chain, chain_seq, problem, id = max(id) OVER () AS last, count(*) OVER () AS n
    FROM (
        SELECT a.id, a.chain, a.chain_seq,
               CASE WHEN a.hash <> steward_audit_hash(a.prev_hash, a.chain, a.chain_seq, a.at, a.actor, a.tenant,
                                                      a.task_id, a.kind, a.data) THEN 'hash'
                    WHEN a.chain_seq <> 1 AND p.id IS NULL AND b.chain IS NULL THEN 'gap'
                    WHEN a.prev_hash <> coalesce(p.hash, b.hash, ''::bytea) THEN 'link'
               END AS problem
        FROM (SELECT * FROM steward_audit WHERE id > %(after)s ORDER BY id LIMIT %(limit)s) a
        LEFT JOIN steward_audit p ON p.chain = a.chain AND p.chain_seq = a.chain_seq - 1
        -- the row before it archived and dropped: its boundary (runtime/lifecycle/archive.py)
        LEFT JOIN steward_audit_boundary b ON b.chain = a.chain AND b.chain_seq = a.chain_seq - 1
    ) checked
) counted
WHERE problem IS NOT NULL OR last
