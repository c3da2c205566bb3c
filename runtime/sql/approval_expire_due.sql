-- Expiry means deny: every pending approval past its expires_at becomes `expired`, and
-- its task, blocked on it, goes back to the queue so the agent's timeout branch runs.
-- One statement, so an approval and its task move together.
--
-- Races:
-- * A person deciding at the same instant races this on the approval's row:
--   approval_decide's UPDATE requires `expires_at > now()` and `state = 'pending'`, this
--   one `expires_at <= now()` and the same state; whichever locks the row first wins and
--   the other changes nothing.
-- * The task's next attempt, which reads its packages holding the task's row lock and
--   ends `await` again if one is still pending (runtime/approvals/request.py). The
--   tasks are locked first, by id (the order approval_decide.sql and the attempt take:
--   task, then package), and a task an attempt holds is skipped this round: its
--   package stays pending, the attempt ends `await` or expires it itself, and the next
--   sweep finds it. Expiring the package under a running attempt and re-queueing by this
--   statement's snapshot (`running`) would leave the task blocked on a package already
--   expired, with nothing left to wake it (tests/runtime/approvals/test_decide_race.py).
-- * A task no longer blocked on it (a stop got there first) stays where it is.
WITH due AS (
    SELECT DISTINCT a.task_id FROM steward_approval a WHERE a.state = 'pending' AND a.expires_at <= now()
), locked AS (
    SELECT t.id, t.status, t.blocked_reason, t.pool
    FROM steward_task t
    WHERE t.id IN (SELECT task_id FROM due)
    ORDER BY t.id
    FOR UPDATE SKIP LOCKED
), expired AS (
    UPDATE steward_approval a
    SET state = 'expired', decided_at = now()
    FROM locked
    WHERE a.task_id = locked.id AND a.state = 'pending' AND a.expires_at <= now()
    RETURNING a.id, a.tenant, a.task_id
), woken AS (
    -- On the locked row's latest version, not this statement's snapshot.
    UPDATE steward_task t
    SET status = 'queued', next_reason = 'resume', blocked_reason = NULL, queued_at = now(),
        status_note = 'approval ' || (SELECT min(e.id::text) FROM expired e WHERE e.task_id = t.id) || ' expired',
        crash_count = 0, updated_at = now()
    FROM locked
    WHERE t.id = locked.id AND locked.status = 'blocked' AND locked.blocked_reason = 'approval_pending'
      AND EXISTS (SELECT 1 FROM expired e WHERE e.task_id = locked.id)
    RETURNING t.id, t.pool
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, expired.tenant, expired.task_id, 'approval.expired',
           jsonb_build_object('approval_id', expired.id, 'task_requeued', woken.id IS NOT NULL)
    FROM expired LEFT JOIN woken ON woken.id = expired.task_id
)
SELECT pool, count(*) AS count FROM woken GROUP BY pool
