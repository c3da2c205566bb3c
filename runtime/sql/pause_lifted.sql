-- A running task of a paused tree has just ended `pause` (blocked, tree_paused), with its
-- own row locked. If the tree's pause was lifted before that, the release's statement
-- could not see this task blocked and did not queue it: queue it again here, audited
-- as the release would have (`task.resumed`). While the pause is open this matches
-- nothing, and the release queues it with the rest.
WITH moved AS (
    UPDATE steward_task t
    SET status = 'queued', blocked_reason = NULL, next_reason = 'resume', queued_at = now(), crash_count = 0,
        status_note = 'its tree''s pause was lifted as it paused', updated_at = now()
    WHERE t.id = %(task)s AND t.status = 'blocked' AND t.blocked_reason = 'tree_paused'
      AND NOT EXISTS (SELECT 1 FROM steward_tree_pause p WHERE p.root_id = t.root_id AND p.released_at IS NULL)
    RETURNING t.id, t.tenant, t.pool
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, moved.tenant, moved.id, 'task.resumed',
           jsonb_build_object('from', 'blocked', 'blocked_reason', 'tree_paused', 'pause_lifted', true)
    FROM moved
)
SELECT pool FROM moved
