-- Pools holding a queued task that has waited longer than %(age)s seconds while one of
-- the pool's slots is free. One wake-up per pool is enough: the worker that takes it
-- drains the pool and passes the wake-up on if work remains (runtime/executor.py).
SELECT DISTINCT t.pool
FROM steward_task t
WHERE t.status = 'queued' AND t.queued_at < now() - make_interval(secs => %(age)s::float8)
  AND EXISTS (SELECT 1 FROM steward_slot s JOIN steward_pool p ON p.name = s.pool
              WHERE s.pool = t.pool AND s.task_id IS NULL AND s.number < p.max_running)
