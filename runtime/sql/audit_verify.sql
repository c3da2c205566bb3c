-- Recompute each row's hash and compare each row's link with its predecessor in the
-- same chain. The first failing row by id is the earliest evidence of tampering.
WITH checked AS (
    SELECT id, chain, chain_seq, hash, prev_hash,
           lag(hash) OVER w AS expected_prev,
           lag(chain_seq) OVER w AS previous_seq,
           steward_audit_hash(prev_hash, chain, chain_seq, at, actor, tenant, task_id, kind, data)
               AS recomputed
    FROM steward_audit
    WINDOW w AS (PARTITION BY chain ORDER BY chain_seq)
)
SELECT id, chain, chain_seq,
       CASE WHEN hash <> recomputed THEN 'hash'
            WHEN chain_seq <> coalesce(previous_seq, 0) + 1 THEN 'gap'
            ELSE 'link' END
FROM checked
WHERE hash <> recomputed
   OR prev_hash <> coalesce(expected_prev, '')
   OR chain_seq <> coalesce(previous_seq, 0) + 1
ORDER BY id
LIMIT 1
