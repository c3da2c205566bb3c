-- One pool's limits and usage, as pool_usage.sql reads each pool's (see there why the
-- figures never count the pool's tasks): what an operator sees right after changing it.
SELECT p.name, p.max_running, p.max_queued, p.created_at,
       coalesce((SELECT sum(c.admitted) FROM steward_pool_count c WHERE c.pool = p.name), 0)::bigint,
       (SELECT count(*) FROM steward_slot s JOIN steward_task t ON t.id = s.task_id
        WHERE s.pool = p.name AND t.status = 'running'),
       (SELECT count(*) FROM steward_slot s WHERE s.pool = p.name AND s.task_id IS NOT NULL)
FROM steward_pool p
WHERE p.name = %(name)s
