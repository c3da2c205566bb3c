-- Finish the stop of one task: stopping -> cancelled, once every boundary acknowledged
-- (or, with %(due)s, once its bound passed) and none of its children is still live, so
-- a tree is cancelled leaf first. The caller holds the parent's row lock (parent-before-
-- child order), so two last children cannot both miss their parent's turn.
WITH acks AS (
    SELECT count(DISTINCT a.boundary) AS n FROM steward_stop_ack a
    WHERE a.task_id = %(task)s AND a.stop_id = (SELECT stop_id FROM steward_task WHERE id = %(task)s)
), done AS (
    UPDATE steward_task t
    SET status = 'cancelled', finished_at = now(), updated_at = now(),
        status_note = CASE WHEN (SELECT n FROM acks) = 4 THEN 'cancelled: every boundary acknowledged'
                           ELSE 'cancelled: the stop''s bound passed; see its stop summary' END
    WHERE t.id = %(task)s AND t.status = 'stopping'
      AND ((SELECT n FROM acks) = 4 OR (%(due)s AND t.stop_deadline <= now()))
      AND NOT EXISTS (SELECT 1 FROM steward_task c
                      WHERE c.parent_id = t.id AND c.status NOT IN ('completed', 'failed', 'cancelled'))
    RETURNING t.id, t.parent_id, t.tenant, t.stop_id, (SELECT n FROM acks) = 4 AS acknowledged
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, done.tenant, done.id, 'task.cancelled',
           jsonb_build_object('stop', done.stop_id::text, 'acknowledged', done.acknowledged,
                              'missing', (SELECT coalesce(jsonb_agg(b ORDER BY b), '[]'::jsonb)
                                          FROM unnest(ARRAY['credential_gateway', 'scheduler', 'storage', 'worker']) b
                                          WHERE NOT EXISTS (SELECT 1 FROM steward_stop_ack a
                                                            WHERE a.task_id = done.id AND a.stop_id = done.stop_id
                                                              AND a.boundary = b)))
           || %(via)s::jsonb  -- the channel and credential of the action that settled it, if one did
    FROM done
), finished AS (
    -- The stop is over once no task it covers is live. One clock with its request (now():
    -- in the requesting transaction, the same instant), and never before it.
    UPDATE steward_stop s
    SET finished_at = greatest(now(), s.requested_at),
        outcome = CASE WHEN EXISTS (
            SELECT 1 FROM steward_task x WHERE x.stop_id = s.id AND x.id <> %(task)s
              AND (SELECT count(DISTINCT a.boundary) FROM steward_stop_ack a
                   WHERE a.task_id = x.id AND a.stop_id = s.id) < 4) OR NOT (SELECT acknowledged FROM done)
            THEN 'bounded' ELSE 'acknowledged' END
    FROM done
    WHERE s.id = done.stop_id AND s.finished_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM steward_task x WHERE x.stop_id = s.id AND x.id <> %(task)s
                                                    AND x.status = 'stopping')
    RETURNING s.id
)
SELECT done.id, done.parent_id, done.stop_id, done.acknowledged, (SELECT count(*) FROM finished) AS stop_finished
FROM done
