-- Heartbeat: extend a live attempt's lease. Matches nothing once the supervisor has
-- ended the attempt, so a late heartbeat cannot revive a recovered lease.
UPDATE steward_attempt
SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => %(lease)s::float8)
WHERE task_id = %(task)s AND epoch = %(epoch)s AND ended_at IS NULL
