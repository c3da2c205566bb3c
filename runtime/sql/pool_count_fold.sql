-- Fold the kept-count rows of backends that have disconnected into each pool's shard 0,
-- so that admission (steward_submit) sums a handful of rows however many connections
-- have come and gone. One statement: every snapshot sees either the rows or their fold,
-- never both, so a concurrent admission sum stays exact.
--
-- Races: a new backend may reuse a pid whose row is being folded. SKIP LOCKED passes
-- over a row its owner is writing; if we lock it first, the owner's UPDATE waits for us,
-- then finds the row gone and inserts a fresh one (migration 0004). Two supervisors
-- delete disjoint rows (SKIP LOCKED) and upsert shard 0 in pool order, so they cannot
-- deadlock on it.
WITH gone AS (
    DELETE FROM steward_pool_count c
    WHERE (c.pool, c.shard) IN (
        SELECT d.pool, d.shard FROM steward_pool_count d
        WHERE d.shard <> 0
          AND d.shard NOT IN (SELECT a.pid FROM pg_stat_get_activity(NULL) a WHERE a.pid IS NOT NULL)
        FOR UPDATE SKIP LOCKED)
    RETURNING c.pool, c.admitted
)
INSERT INTO steward_pool_count (pool, shard, admitted)
SELECT pool, 0, sum(admitted) FROM gone GROUP BY pool ORDER BY pool
ON CONFLICT (pool, shard) DO UPDATE SET admitted = steward_pool_count.admitted + EXCLUDED.admitted
