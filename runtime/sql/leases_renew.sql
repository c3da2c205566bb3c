-- Heartbeat: extend the leases of every live attempt this process holds, in one
-- statement (a dense worker holds many: docs/adr/0033-dense-worker.md). Each lease is
-- fenced by its own epoch: an attempt the supervisor already ended, or one a newer
-- epoch replaced, matches nothing, so a late heartbeat cannot revive a recovered lease,
-- and its absence from the result tells the keeper that this one attempt lost its lease
-- (the others are renewed all the same).
-- It returns each task's status: a worker that missed a stop's notification sees it
-- here, at its next renewal (runtime/worker/stop_watch.py). A stopping task's attempt is
-- still renewed: its worker is alive and ending it, and the supervisor must not take it
-- for abandoned. It also says whether the task's tree is paused, for a worker that
-- missed the pause's notification (the attempt then ends at its next new step).
UPDATE steward_attempt a
SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %(lease)s::float8)
FROM unnest(%(tasks)s::uuid[], %(epochs)s::int[]) AS held(task_id, epoch), steward_task t
WHERE a.task_id = held.task_id AND a.epoch = held.epoch AND a.ended_at IS NULL AND t.id = a.task_id
RETURNING a.task_id, a.epoch, t.status,
          EXISTS (SELECT 1 FROM steward_tree_pause p WHERE p.root_id = t.root_id AND p.released_at IS NULL) AS paused
