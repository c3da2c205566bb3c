-- The first statement of a stop (runtime/stops/services.py _locked_tree): lock the
-- trees it covers top-down, parents first (the order every writer uses), waiting for any
-- writer holding one of their rows. It returns nothing: stop_tree.sql then reads them
-- under these locks, in a snapshot that sees what those writers committed.
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth FROM steward_task WHERE id = ANY (%(roots)s::uuid[])
    UNION
    SELECT c.id, tree.depth + 1 FROM steward_task c JOIN tree ON c.parent_id = tree.id
)
SELECT count(*) FROM (
    SELECT t.id FROM steward_task t JOIN tree USING (id) ORDER BY tree.depth, t.id FOR UPDATE OF t
) locked
