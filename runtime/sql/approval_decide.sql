-- A person's decision on a pending approval (runtime/approvals/services.py approval_decide),
-- in one statement and, in autocommit, one transaction: the package's conditional move,
-- its task's re-queue and the `approval.approved|denied` audit row commit together, in
-- one round trip where there were eight (BEGIN, two reads, two UPDATEs, the audit
-- INSERT, a read back, COMMIT). It returns the package as found (for the refusals the
-- caller raises: not found, self-approval, a stopped task) and, if this decision won,
-- the package as decided and the re-queued task's pool, for the wake-up on commit.
--
-- Races:
-- * Two decisions (or a decision and the expiry sweep, approval_expire_due.sql) on one
--   package: the UPDATE requires `state = 'pending' AND expires_at > now()`. Whoever
--   locks the row first wins; the other waits for its commit, re-checks on the new
--   row version and changes nothing (the caller then reads the row again to name the
--   winner's state).
-- * The task's next attempt, which reads its packages holding the task's row lock and
--   ends `await` again if one is still pending (runtime/approvals/request.py): this
--   statement takes the same lock (`task`, FOR UPDATE) before it moves the package
--   (the UPDATE reads `task`, so the lock is taken first), and re-queues on the row it
--   locked, the latest version, not on this statement's snapshot. So either the
--   attempt's read comes after this commit and sees the decision, or this waits for
--   the attempt's commit and finds the task blocked again and re-queues it: no
--   wake-up is lost. A re-queue conditional on the snapshot's status would see the
--   attempt's `running` and skip, and the task would wait for a decision already made.
--   Taking the task first also keeps the lock order (task, then package) the attempt's.
-- * A stop: a task stopping or finished takes no decision (%(closed)s). A stop that
--   commits after this statement's lock finds the task queued, as for any queued task.
WITH found AS (
    SELECT a.id, a.task_id, a.owner, a.state
    FROM steward_approval a
    WHERE a.id = %(approval)s AND a.tenant = %(tenant)s
), task AS (
    SELECT t.id, t.status, t.blocked_reason, t.pool
    FROM steward_task t
    WHERE t.id = (SELECT task_id FROM found)
    FOR UPDATE
), decided AS (
    UPDATE steward_approval a
    SET state = %(state)s, decided_by = %(actor)s, decided_at = now(), comment = %(comment)s
    FROM task
    WHERE a.id = %(approval)s AND a.task_id = task.id AND a.state = 'pending' AND a.expires_at > now()
      AND task.status <> ALL (%(closed)s::text[])
      AND NOT (%(refuse_owner)s AND a.owner = %(actor)s)
    RETURNING a.*
), requeued AS (
    UPDATE steward_task t
    SET status = 'queued', next_reason = 'resume', blocked_reason = NULL, queued_at = now(), crash_count = 0,
        status_note = %(note)s, updated_at = now()
    FROM task, decided
    WHERE t.id = task.id AND task.status = 'blocked' AND task.blocked_reason = 'approval_pending'
    RETURNING t.pool
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, d.tenant, d.task_id, 'approval.' || d.state,
           %(data)s::jsonb || jsonb_build_object('action_hash', d.action_hash,
                                                 'task_requeued', EXISTS (SELECT 1 FROM requeued))
    FROM decided d
)
SELECT f.owner, f.state, f.task_id, (SELECT status FROM task), (SELECT pool FROM requeued), d.*
FROM found f LEFT JOIN decided d ON true
