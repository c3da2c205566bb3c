-- A child reached a terminal status: wake its parent if the parent is waiting and every
-- child it waits for is now terminal. The caller locked the parent row first (see
-- runtime/attempts/transitions.py), so this statement's snapshot already includes every sibling
-- that finished before us: two last children cannot both miss the wake-up.
WITH woken AS (
    UPDATE steward_task p
    SET status = 'queued', next_reason = 'resume', queued_at = now(), waiting_on = NULL,
        status_note = '', updated_at = now()
    WHERE p.id = %(parent)s AND p.status = 'waiting'
      AND NOT EXISTS (
          SELECT 1 FROM steward_task c
          WHERE c.id = ANY (p.waiting_on)
            AND c.status NOT IN ('completed', 'failed', 'cancelled'))
    RETURNING p.id, p.tenant, p.pool
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, woken.tenant, woken.id, 'task.woken',
           jsonb_build_object('by', 'children', 'last_child', %(child)s::text)
    FROM woken
)
SELECT pool FROM woken
