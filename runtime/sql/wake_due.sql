-- Wake sleeping tasks whose timer is due and waiting tasks whose children are all
-- terminal. SKIP LOCKED lets several supervisors share the work without overlap.
WITH due AS (
    SELECT t.id, CASE WHEN t.status = 'sleeping' THEN 'timer' ELSE 'children' END AS by
    FROM steward_task t
    WHERE (t.status = 'sleeping' AND t.wake_at <= now())
       OR (t.status = 'waiting' AND NOT EXISTS (
              SELECT 1 FROM steward_task c
              WHERE c.id = ANY (t.waiting_on)
                AND c.status NOT IN ('completed', 'failed', 'cancelled')))
    ORDER BY t.wake_at NULLS LAST
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
), woken AS (
    UPDATE steward_task t
    SET status = 'queued', next_reason = 'resume', queued_at = now(), wake_at = NULL,
        waiting_on = NULL, status_note = '', updated_at = now()
    FROM due
    WHERE t.id = due.id AND t.status IN ('sleeping', 'waiting')
    RETURNING t.id, t.tenant, t.pool, due.by
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, woken.tenant, woken.id, 'task.woken',
           jsonb_build_object('by', woken.by)
    FROM woken
)
SELECT pool, count(*) AS count FROM woken GROUP BY pool
