-- Free slots left over from shrinking a pool: their numbers are past max_running, so
-- claim.sql already never hands them out; deleting them keeps `steward pools` honest.
DELETE FROM steward_slot s
USING steward_pool p
WHERE s.pool = p.name AND s.number >= p.max_running AND s.task_id IS NULL
