-- A person's decision on a pending approval (runtime/approvals/services.py approval_decide),
-- in one statement and, in autocommit, one transaction: the package's conditional move,
-- its task's re-queue and the `approval.<state>` audit row commit together, in one round
-- trip where there were eight (BEGIN, two reads, two UPDATEs, the audit INSERT, a read
-- back, COMMIT). It returns the package as found (for the refusals the caller raises:
-- not found, self-approval, a stopped task), what an approve found changed, and, if this
-- decision moved the package, the package as moved and the re-queued task's pool, for
-- the wake-up on commit.
--
-- What the package moves to (states.APPROVAL_TRANSITIONS):
-- * past its expires_at: `expired` (expire), whatever the decision: expiry means deny,
--   and the package reads as the sweep would have left it.
-- * an approve, when what the package is bound to and the database holds has changed
--   since the request (`changed`: the tenant's authz_revision, the policy_version, the
--   task's input digest; each {before, after}): `stale` (outdate), with the reason, as
--   the executor's re-check would have found it (approval_check.sql). The precondition
--   and authority need the agent's code and stay the executor's to re-check.
-- * otherwise `approved` or `denied`. A deny is recorded whatever changed: nothing acts
--   on a denial, and the person's no stands.
-- In each case the task is re-queued, so that the agent's branch for it runs.
--
-- Races:
-- * Two decisions (or a decision and the expiry sweep, approval_expire_due.sql) on one
--   package: each UPDATE requires `state = 'pending'`. Whoever locks the row first wins;
--   the other waits for its commit, re-checks on the new row version and changes
--   nothing (the caller then reads the row again to name the winner's state). Past
--   expires_at, both move it to `expired`, so an expired package is never approved.
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
-- * A grant change (authz_bump.sql, which takes the tenant's revision row first): the
--   revision is read FOR SHARE, after the task's lock, which returns the row's latest
--   committed version rather than this statement's snapshot, and holds the change off
--   until this commits. So a change committed before this statement read the row makes
--   the approve `stale`, and one committing after finds the package approved, with the
--   old revision in its digest, for the executor's re-check to find stale: an approval
--   is never acted on under authority changed since it was requested. (A tenant with no
--   revision row yet has nothing to lock: its first grant change is left to the re-check.)
WITH found AS (
    SELECT a.id, a.task_id, a.owner, a.state, a.context
    FROM steward_approval a
    WHERE a.id = %(approval)s AND a.tenant = %(tenant)s
), task AS (
    SELECT t.id, t.tenant, t.status, t.blocked_reason, t.pool, t.input_digest
    FROM steward_task t
    WHERE t.id = (SELECT task_id FROM found)
    FOR UPDATE
), revision AS (
    -- Joined to `task`, so that its lock comes after the task's (the rows are locked as
    -- the join emits them).
    SELECT r.revision
    FROM steward_authz_revision r, task
    WHERE r.tenant = task.tenant
    FOR SHARE OF r
), now_bound AS (
    -- What the package is bound to, as it stands now, beside what the request saw.
    SELECT f.context, jsonb_build_object(
               'authz_revision', coalesce((SELECT revision FROM revision), 0),
               'policy_version', %(policy_version)s::text,
               'input_digest', task.input_digest) AS now
    FROM found f, task
), changed AS (
    SELECT coalesce(jsonb_object_agg(k.key, jsonb_build_object('before', b.context -> k.key, 'after', k.value)),
                    '{}'::jsonb) AS changes,
           string_agg(k.key || ' ' || coalesce(b.context ->> k.key, 'none') || ' → ' || (k.value #>> '{}'), ', '
                      ORDER BY k.key) AS said
    FROM now_bound b, jsonb_each(b.now) k
    WHERE %(approve)s AND b.context -> k.key IS DISTINCT FROM k.value
), decided AS (
    UPDATE steward_approval a
    SET state = CASE WHEN a.expires_at <= now() THEN 'expired'
                     WHEN c.said IS NOT NULL THEN 'stale'
                     ELSE %(state)s END,
        decided_by = CASE WHEN a.expires_at <= now() THEN NULL ELSE %(actor)s END,
        decided_at = now(),
        comment = CASE WHEN a.expires_at <= now() THEN '' ELSE %(comment)s END,
        stale_reason = CASE WHEN a.expires_at > now() AND c.said IS NOT NULL
                            THEN left('the context changed: ' || c.said, 500) ELSE '' END
    FROM task, changed c
    WHERE a.id = %(approval)s AND a.task_id = task.id AND a.state = 'pending'
      AND task.status <> ALL (%(closed)s::text[])
      AND NOT (%(refuse_owner)s AND a.owner = %(actor)s)
    RETURNING a.*
), requeued AS (
    UPDATE steward_task t
    SET status = 'queued', next_reason = 'resume', blocked_reason = NULL, queued_at = now(), crash_count = 0,
        status_note = 'approval ' || decided.id || ' ' || decided.state
                      || CASE decided.state WHEN 'expired' THEN '' WHEN 'stale' THEN ' when ' || %(actor)s || ' approved it'
                         ELSE ' by ' || %(actor)s END,
        updated_at = now()
    FROM task, decided
    WHERE t.id = task.id AND task.status = 'blocked' AND task.blocked_reason = 'approval_pending'
    RETURNING t.pool
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, d.tenant, d.task_id, 'approval.' || d.state,
           %(data)s::jsonb || jsonb_build_object('action_hash', d.action_hash,
                                                 'task_requeued', EXISTS (SELECT 1 FROM requeued))
               || CASE d.state WHEN 'stale' THEN jsonb_build_object('reason', d.stale_reason, 'changed', c.changes)
                               WHEN 'expired' THEN jsonb_build_object('expires_at', d.expires_at)
                               ELSE '{}'::jsonb END
    FROM decided d, changed c
)
SELECT f.owner AS found_owner, f.state AS found_state, f.task_id AS found_task_id,
       (SELECT status FROM task) AS task_status, (SELECT pool FROM requeued) AS requeued_pool,
       (SELECT changes FROM changed) AS changes, d.*
FROM found f LEFT JOIN decided d ON true
