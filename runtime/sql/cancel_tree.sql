-- Cancel a task and its live descendants. Rows are locked top-down (parents first),
-- the order every other writer uses, and moved with one conditional UPDATE: a task
-- that finished meanwhile keeps its terminal status.
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth FROM steward_task WHERE id = %(task)s
    UNION ALL
    SELECT c.id, tree.depth + 1 FROM steward_task c JOIN tree ON c.parent_id = tree.id
), locked AS (
    SELECT t.id FROM steward_task t JOIN tree USING (id)
    ORDER BY tree.depth, t.id
    FOR UPDATE OF t
)
UPDATE steward_task t
SET status = 'cancelled', finished_at = now(), updated_at = now(), wake_at = NULL,
    waiting_on = NULL, status_note = 'cancelled'
FROM locked
WHERE t.id = locked.id AND t.status NOT IN ('completed', 'failed', 'cancelled')
RETURNING t.id
