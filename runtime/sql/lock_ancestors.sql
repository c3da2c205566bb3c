-- Lock a task and its ancestors, root first: the order in which every writer locks a
-- tree (parent before child), so acknowledging a stop never deadlocks with a stop, a
-- finishing child or another acknowledgment. Rows come back from the task up.
WITH RECURSIVE up AS (
    SELECT id, parent_id, 0 AS height FROM steward_task WHERE id = %(task)s
    UNION ALL
    SELECT p.id, p.parent_id, up.height + 1 FROM steward_task p JOIN up ON p.id = up.parent_id
), locked AS (
    SELECT t.id, up.height FROM steward_task t JOIN up USING (id)
    ORDER BY up.height DESC
    FOR UPDATE OF t
)
SELECT id FROM locked ORDER BY height
