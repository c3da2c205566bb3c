-- Heartbeat: extend a live attempt's lease. Matches nothing once the supervisor has
-- ended the attempt, so a late heartbeat cannot revive a recovered lease. It returns the
-- task's status: a worker that missed a stop's notification sees it here, at its next
-- renewal (runtime/worker/stop_watch.py). A stopping task's attempt is still renewed: its
-- worker is alive and ending it, and the supervisor must not take it for abandoned.
-- It also says whether the task's tree is paused, for a worker that missed the pause's
-- notification (the attempt then ends at its next new step).
UPDATE steward_attempt a
SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %(lease)s::float8)
FROM steward_task t
WHERE a.task_id = %(task)s AND a.epoch = %(epoch)s AND a.ended_at IS NULL AND t.id = a.task_id
RETURNING t.status,
          EXISTS (SELECT 1 FROM steward_tree_pause p WHERE p.root_id = t.root_id AND p.released_at IS NULL) AS paused
