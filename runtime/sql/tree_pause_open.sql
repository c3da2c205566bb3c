-- Record that a fan-out breaker paused a tree, or find the pause already open on it (a
-- second trip while paused joins the first: one open pause per tree, a partial unique
-- index). Run under tree_lock.sql and spawn_lock.sql, so a concurrent pauser of the same
-- tree has committed before this statement's snapshot is taken.
WITH made AS (
    INSERT INTO steward_tree_pause (root_id, tenant, task_id, breaker, "limit", observed, held, released_by)
    VALUES (%(root)s, %(tenant)s, %(task)s, %(breaker)s, %(limit)s, %(observed)s, 0, '')
    ON CONFLICT (root_id) WHERE released_at IS NULL DO NOTHING
    RETURNING id
)
SELECT id, true AS opened FROM made
UNION ALL
SELECT p.id, false FROM steward_tree_pause p
WHERE p.root_id = %(root)s AND p.released_at IS NULL AND NOT EXISTS (SELECT 1 FROM made)
