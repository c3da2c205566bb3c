-- How many tasks the pool holds in {queued, running}, and its limits. The caller holds
-- the pool row lock (pool_lock.sql), so the count cannot change under it.
SELECT (SELECT count(*) FROM steward_task t
        WHERE t.pool = p.name AND t.status IN ('queued', 'running')),
       p.max_running, p.max_queued
FROM steward_pool p WHERE p.name = %(pool)s
