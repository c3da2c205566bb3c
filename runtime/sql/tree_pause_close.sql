-- A stop that leaves a paused tree nothing to hold closes the tree's pause, in the
-- stop's transaction (runtime/stops/services.py, after stop_begin.sql): every task of
-- the tree is stopping or finished, the stopping ones end cancelled, and an open pause
-- would go on showing a tree "paused, waiting for a person" that nobody can resume into
-- running again (issue 20). A tree with a live task outside the stop (a subtree was
-- stopped) stays paused. Each pause closed is audited in its root's chain, naming the
-- stop. The tree's rows are locked by the stop (its subtree) and by stop_tree.sql's
-- order everywhere else: a resume of the tree (tree_lock.sql) waits for this commit.
WITH trees AS (
    SELECT DISTINCT coalesce(t.root_id, t.id) AS root FROM steward_task t WHERE t.id = ANY (%(tasks)s::uuid[])
), closed AS (
    UPDATE steward_tree_pause p
    SET released_at = now(), released_by = %(actor)s, released = 0
    FROM trees
    WHERE p.root_id = trees.root AND p.released_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM steward_task t
                      WHERE (t.id = p.root_id OR (t.root_id = p.root_id AND t.parent_id IS NOT NULL))
                        AND t.status IN ('blocked', 'dead', 'queued', 'running', 'sleeping', 'waiting'))
    RETURNING p.id, p.root_id, p.tenant
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, closed.tenant, closed.root_id, 'task.pause_closed',
           jsonb_build_object('pause_id', closed.id, 'stop', %(stop)s::text, 'reason', %(reason)s::text)
           || %(via)s::jsonb
    FROM closed
)
SELECT closed.id FROM closed
