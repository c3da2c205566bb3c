-- A stopped attempt acknowledges: its worker has left agent code. End the attempt and
-- free its slot, but only if the task has moved on without it (cancelled, or re-queued
-- by recovery), so a live attempt is never released by mistake.
WITH ended AS (
    UPDATE steward_attempt a
    SET ended_at = now(), end_reason = %(end_reason)s
    FROM steward_task t
    WHERE a.task_id = %(task)s AND a.epoch = %(epoch)s AND a.ended_at IS NULL
      AND t.id = a.task_id AND NOT (t.status = 'running' AND t.epoch = a.epoch)
    RETURNING a.task_id, t.tenant
), freed AS (
    UPDATE steward_slot s SET task_id = NULL, epoch = NULL, taken_at = NULL
    FROM ended
    WHERE s.task_id = ended.task_id AND s.epoch = %(epoch)s
    RETURNING s.pool
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, ended.tenant, ended.task_id, 'attempt.stopped',
           jsonb_build_object('epoch', %(epoch)s::integer, 'end_reason', %(end_reason)s::text,
                              'slot_freed', EXISTS (SELECT 1 FROM freed))
    FROM ended
)
SELECT (SELECT count(*) FROM ended) AS ended, (SELECT pool FROM freed LIMIT 1) AS pool
