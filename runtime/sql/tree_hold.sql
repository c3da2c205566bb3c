-- Hold a paused tree's idle tasks (queued, sleeping, waiting): each becomes blocked
-- (`tree_paused`, event `hold`) with its `task.blocked` audit row, and the pause counts
-- them, in one statement. Running tasks are not touched here: each ends `pause` at its
-- next new step (runtime/limits/breakers.py). Run under tree_lock.sql and
-- spawn_lock.sql, as a statement of its own: its snapshot includes every child that a
-- spawn we waited for committed.
WITH was AS (
    SELECT t.id, t.status FROM steward_task t
    WHERE (t.id = %(root)s OR (t.root_id = %(root)s AND t.parent_id IS NOT NULL))
      AND t.status IN ('queued', 'sleeping', 'waiting') AND t.id <> %(task)s
), held AS (
    UPDATE steward_task t
    SET status = 'blocked', blocked_reason = 'tree_paused', status_note = %(note)s::text, updated_at = now(),
        -- What a running task's `pause` end records too (worker.executor._paused).
        error = jsonb_build_object('code', 'TREE_PAUSED', 'message', %(note)s::text, 'pause_id', %(pause)s::bigint,
                                   'tripped_task', %(task)s::text, 'breaker', %(breaker)s::text)
    FROM was
    WHERE t.id = was.id AND t.status = was.status
    RETURNING t.id, t.tenant, was.status AS was
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, held.tenant, held.id, 'task.blocked',
           jsonb_build_object('blocked_reason', 'tree_paused', 'from', held.was, 'pause_id', %(pause)s::bigint,
                              'tripped_task', %(task)s::text, 'breaker', %(breaker)s::text)
    FROM held
), counted AS (
    UPDATE steward_tree_pause p SET held = p.held + (SELECT count(*) FROM held)
    WHERE p.id = %(pause)s
)
SELECT count(*) AS held FROM held
