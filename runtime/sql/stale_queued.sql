-- Pools whose oldest queued task has waited longer than %(age)s seconds while one of
-- the pool's slots is free. One wake-up per pool is enough: the worker that takes it
-- drains the pool and passes the wake-up on if work remains (runtime/worker/executor.py).
--
-- Cost: for each pool, one probe of task_claim_order (its first entry for the pool is
-- the pool's oldest queued task: the index is the claim order) and one of
-- slot_free_by_pool. A sweep reads a few rows per pool, whatever the backlog; the
-- statement it replaces read every queued task, every second, in every supervisor.
-- A pool has a queued task older than the cut-off exactly when its oldest one is.
SELECT p.name
FROM steward_pool p
WHERE (SELECT t.queued_at FROM steward_task t
       WHERE t.pool = p.name AND t.status = 'queued'
       ORDER BY t.queued_at, t.id
       LIMIT 1) < now() - make_interval(secs => %(age)s::float8)
  AND EXISTS (SELECT 1 FROM steward_slot s
              WHERE s.pool = p.name AND s.task_id IS NULL AND s.number < p.max_running)
