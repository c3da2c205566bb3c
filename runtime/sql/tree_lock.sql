-- Lock every task of one tree, parents first, before a pause or its release changes
-- several of them. Parents first, then by id, is the order every writer of several
-- tasks uses (a stop's stop_tree.sql, a child waking its parent), so a pause, a release
-- and a stop of the same tree queue behind each other instead of deadlocking.
-- Every spawn of the tree holds its spawner's row (fence.sql, FOR SHARE) until it
-- commits, so this also waits for the spawns already under way.
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth FROM steward_task WHERE id = %(root)s
    UNION ALL
    SELECT c.id, tree.depth + 1 FROM steward_task c JOIN tree ON c.parent_id = tree.id
)
SELECT t.id FROM steward_task t JOIN tree USING (id)
ORDER BY tree.depth, t.id
FOR UPDATE OF t
