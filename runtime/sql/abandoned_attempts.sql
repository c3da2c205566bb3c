-- The tasks with a live attempt that the task moved on without (cancelled, or re-queued
-- and claimed again) and whose lease has expired: the worker is gone and will never
-- acknowledge. Read without locks; release_abandoned.sql re-checks each under its lock.
SELECT DISTINCT a.task_id
FROM steward_attempt a
JOIN steward_task t ON t.id = a.task_id
WHERE a.ended_at IS NULL AND a.lease_expires_at < now()
  AND NOT (t.status = 'running' AND t.epoch = a.epoch)
LIMIT 200
