-- Each pool's limits and usage, without counting its tasks: admitted (queued + running)
-- is the sum of its kept counts (steward_pool_count), and running tasks are counted
-- through the slots they hold (a running task always holds one: claim.sql takes the
-- slot and the status together), so every figure is bounded by the pool's size, not
-- by its backlog or its history. One statement, one snapshot: queued = admitted -
-- running is exact. With %(only)s, just that pool (a page of one): what an operator
-- sees right after changing it.
SELECT p.name, p.max_running, p.max_queued, p.created_at,
       coalesce((SELECT sum(c.admitted) FROM steward_pool_count c WHERE c.pool = p.name), 0)::bigint AS admitted,
       (SELECT count(*) FROM steward_slot s JOIN steward_task t ON t.id = s.task_id
        WHERE s.pool = p.name AND t.status = 'running') AS running,
       (SELECT count(*) FROM steward_slot s WHERE s.pool = p.name AND s.task_id IS NOT NULL) AS held
FROM steward_pool p
WHERE p.name > %(after)s AND (%(only)s::text IS NULL OR p.name = %(only)s::text)
ORDER BY p.name
LIMIT %(limit)s
