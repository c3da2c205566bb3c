-- A tree's open pause as the console, the API and the CLI show it: the pause, and what
-- it holds now (tasks blocked `tree_paused`) and what is still running (each ends at
-- its next new step), read off the task_tree index and the root's primary key.
SELECT p.id, p.root_id, p.task_id, p.breaker, p."limit", p.observed, p.paused_at, p.held AS held_at_pause,
       count(*) FILTER (WHERE t.status = 'blocked' AND t.blocked_reason = 'tree_paused') AS holding,
       count(*) FILTER (WHERE t.status = 'running') AS running
FROM steward_tree_pause p
LEFT JOIN steward_task t ON (t.id = p.root_id OR (t.root_id = p.root_id AND t.parent_id IS NOT NULL))
WHERE p.root_id = %(root)s AND p.released_at IS NULL
GROUP BY p.id
