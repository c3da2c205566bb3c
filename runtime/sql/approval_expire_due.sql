-- Expiry means deny: every pending approval past its expires_at becomes `expired`, and
-- its task, blocked on it, goes back to the queue so the agent's timeout branch runs.
-- One statement, so an approval and its task move together. A person deciding at the
-- same instant races this on the approval's row: approval_decide's UPDATE requires
-- `expires_at > now()` and `state = 'pending'`, this one `expires_at <= now()` and the
-- same state; whichever locks the row first wins and the other changes nothing. A task
-- no longer blocked on it (a stop got there first) stays where it is.
WITH expired AS (
    UPDATE steward_approval a
    SET state = 'expired', decided_at = now()
    WHERE a.state = 'pending' AND a.expires_at <= now()
    RETURNING a.id, a.tenant, a.task_id
), woken AS (
    UPDATE steward_task t
    SET status = 'queued', next_reason = 'resume', blocked_reason = NULL, queued_at = now(),
        status_note = 'approval ' || expired.id || ' expired', crash_count = 0, updated_at = now()
    FROM expired
    WHERE t.id = expired.task_id AND t.status = 'blocked' AND t.blocked_reason = 'approval_pending'
    RETURNING t.id, t.pool
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, expired.tenant, expired.task_id, 'approval.expired',
           jsonb_build_object('approval_id', expired.id, 'task_requeued', woken.id IS NOT NULL)
    FROM expired LEFT JOIN woken ON woken.id = expired.task_id
)
SELECT pool, count(*) FROM woken GROUP BY pool
