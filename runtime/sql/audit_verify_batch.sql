-- One batch of `audit verify`: the next %(limit)s rows in (chain, chain_seq) order after
-- the row (%(chain)s, %(seq)s), up to the end of chain %(last_chain)s, read straight off
-- the audit_chain_seq index as one range (no sort), each checked against its own hash
-- and against the row before it in its chain.
--
-- The row before the batch's first row is the previous batch's last, passed in as
-- (%(chain)s, %(seq)s, %(hash)s), so a chain that spans a batch boundary is checked
-- across it; (%(chain)s, %(seq)s, %(hash)s) can as well be a known-good point (a seal of
-- a chain's head) to verify that chain from, with %(last_chain)s the same chain.
--
-- A row is bad if its content does not match its hash ('hash'), if its sequence number
-- does not follow the row before it ('gap': a row was removed), or if its prev_hash is
-- not that row's hash ('link': the row before it changed). Returned: every bad row, and
-- the batch's last row (to carry on from) with its position in the batch.
--
-- A chain whose older rows were archived and dropped (runtime/lifecycle/archive.py)
-- starts from its boundary, its last archived row, instead of from nothing: looked up
-- (one probe of the boundary's primary key) only for a row that starts its chain in the
-- batch, coalesce() evaluating it only then.
--
-- With %(tenant)s, only that tenant's rows are checked: a chain never spans tenants
-- (steward_audit_chain), so whole chains are kept and their links still line up.
--
-- Rows are never updated or deleted (the append-only trigger), so batches read in
-- different snapshots still see one consistent trail: a row appended meanwhile is
-- either in a later batch or not at all.
SELECT id, chain, chain_seq, hash, problem, last, n
FROM (
    -- One WindowAgg for every window function; the CASEs are evaluated above it.
    SELECT id, chain, chain_seq, hash,
           CASE WHEN hash <> steward_audit_hash(prev_hash, chain, chain_seq, at, actor, tenant, task_id,
                                                kind, data) THEN 'hash'
                WHEN chain_seq <> coalesce(CASE WHEN lag(chain) OVER w = chain THEN lag(chain_seq) OVER w
                                                WHEN lag(chain) OVER w IS NULL AND chain = %(chain)s
                                                THEN %(seq)s::integer END,
                                           (SELECT b.chain_seq FROM steward_audit_boundary b WHERE b.chain = batch.chain),
                                           0) + 1 THEN 'gap'
                WHEN prev_hash <> coalesce(CASE WHEN lag(chain) OVER w = chain THEN lag(hash) OVER w
                                                WHEN lag(chain) OVER w IS NULL AND chain = %(chain)s
                                                THEN %(hash)s::bytea END,
                                          (SELECT b.hash FROM steward_audit_boundary b WHERE b.chain = batch.chain),
                                          ''::bytea) THEN 'link'
           END AS problem,
           lead(id) OVER w IS NULL AS last,
           row_number() OVER w AS n
    FROM (
        SELECT * FROM steward_audit
        WHERE (chain, chain_seq) > (%(chain)s::text, %(seq)s::integer) AND chain <= %(last_chain)s::text
          AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
        ORDER BY chain, chain_seq
        LIMIT %(limit)s
    ) batch
    WINDOW w AS (ORDER BY chain, chain_seq)
) checked
WHERE problem IS NOT NULL OR last
