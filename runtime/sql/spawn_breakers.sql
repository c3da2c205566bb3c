-- Which fan-out breaker a spawn by %(parent)s trips, if any, with what each counts; run
-- under spawn_lock.sql in the spawn's transaction, so no concurrent spawn of the tree
-- can slip between this count and the child's insert.
--
-- * paused: the tree's open pause (runtime/limits/pauses.py). A pause takes the same
--   lock before it commits, so once it has, no spawn of the tree is admitted.
-- * depth: the parent's ancestors, walked up by primary key (at most max_depth + 1 of
--   them: past that the answer is already "too deep"); the root is at depth 0.
-- * children: the parent's children (the partial unique index on parent, spawn_seq),
--   counted to max_children at most.
-- * rate: the tree's spawned tasks whose time-ordered ids (runtime/ids.py) were minted in
--   the last minute of the database's clock, read off the task_tree index from the
--   smallest id of that millisecond, counted to the rate at most.
WITH RECURSIVE up AS (
    SELECT t.parent_id, 0 AS depth FROM steward_task t WHERE t.id = %(parent)s
    UNION ALL
    SELECT t.parent_id, up.depth + 1
    FROM up JOIN steward_task t ON t.id = up.parent_id
    WHERE up.depth <= %(max_depth)s
), counted AS MATERIALIZED (  -- once: the CASE below reads each count twice
    SELECT (SELECT p.id FROM steward_tree_pause p WHERE p.root_id = %(root)s AND p.released_at IS NULL) AS paused,
           (SELECT max(depth) FROM up) + 1 AS depth,
           (SELECT count(*) FROM (SELECT 1 FROM steward_task c WHERE c.parent_id = %(parent)s
                                  LIMIT %(max_children)s) k) AS children,
           (SELECT count(*) FROM (SELECT 1 FROM steward_task r
                                  WHERE r.root_id = %(root)s AND r.parent_id IS NOT NULL
                                    AND r.id >= (lpad(to_hex((extract(epoch FROM now()) * 1000)::bigint - 60000), 12, '0')
                                                 || '70008000000000000000')::uuid
                                  LIMIT %(max_spawns_per_minute)s) k) AS recent
)
SELECT CASE WHEN paused IS NOT NULL THEN 'tree_paused'
            WHEN depth > %(max_depth)s THEN 'fanout_depth'
            WHEN children >= %(max_children)s THEN 'fanout_children'
            WHEN recent >= %(max_spawns_per_minute)s THEN 'fanout_rate' END AS breaker,
       depth, children, recent, paused
FROM counted
