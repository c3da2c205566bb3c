-- Move one task to another version of its agent, if it is still as the dry replay saw it:
-- between attempts (%(statuses)s: queued, sleeping, waiting or blocked), on the same epoch (no attempt
-- claimed it since: a claim bumps the epoch and may journal more steps, which the replay
-- never saw), and still on the version it was read on (another upgrade did not win; NULL:
-- not started yet, and the upgrade pins the version its first claim would have fixed).
-- The losing side of each race is named: an upgrade against a claim, against another
-- upgrade, and against a stop (stopping is not a status it moves from).
UPDATE steward_task t
SET agent_version = %(to)s, updated_at = now()
WHERE t.id = %(task)s AND t.tenant = %(tenant)s AND t.epoch = %(epoch)s
  AND t.agent_version IS NOT DISTINCT FROM %(from)s AND t.status = ANY(%(statuses)s::text[])
RETURNING t.id
