-- Lift a tree's open pause (an operator's resume of a task in it: task_resume): close
-- the pause and queue again every other task it still holds (`tree_paused`, event `release`),
-- each with its `task.resumed` audit row, in one statement. Run under tree_lock.sql, so
-- the count the pause records is the number of rows the UPDATE moves. The resumed task
-- itself is task_resume's own conditional UPDATE, before this one. Returns the
-- pause's id and, per pool, how many tasks were queued (to wake its workers).
WITH freed AS (
    UPDATE steward_tree_pause p
    SET released_at = now(), released_by = %(actor)s,
        released = (SELECT count(*) FROM steward_task t
                    WHERE (t.id = %(root)s OR (t.root_id = %(root)s AND t.parent_id IS NOT NULL))
                      AND t.status = 'blocked' AND t.blocked_reason = 'tree_paused' AND t.id <> %(task)s)
    WHERE p.root_id = %(root)s AND p.released_at IS NULL
    RETURNING p.id
), queued AS (
    UPDATE steward_task t
    SET status = 'queued', blocked_reason = NULL, next_reason = 'resume', queued_at = now(), crash_count = 0,
        status_note = %(note)s, updated_at = now()
    FROM freed
    WHERE (t.id = %(root)s OR (t.root_id = %(root)s AND t.parent_id IS NOT NULL))
      AND t.status = 'blocked' AND t.blocked_reason = 'tree_paused' AND t.id <> %(task)s
    RETURNING t.id, t.tenant, t.pool, freed.id AS pause_id
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, queued.tenant, queued.id, 'task.resumed',
           jsonb_build_object('from', 'blocked', 'blocked_reason', 'tree_paused', 'pause_id', queued.pause_id,
                              'by_resume_of', %(task)s::text, 'note', %(note)s::text)
    FROM queued
)
SELECT freed.id AS pause_id, queued.pool, count(queued.id) AS queued
FROM freed LEFT JOIN queued ON true
GROUP BY freed.id, queued.pool
