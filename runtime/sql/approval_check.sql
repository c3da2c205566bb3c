-- Record an approval's re-check (runtime/approvals/request.py) in one statement: each
-- approved package moved to `consumed`, or to `stale` with its reason, with its
-- `approval.consumed|stale` audit row (a stale one's `changed`: each part of the context
-- that differs, before and after, as an approve's APPROVAL_STALE names them), and what
-- the agent is told journaled at the check's seq; all of it or nothing, in one round
-- trip where there were six.
--
-- Races:
-- * Recovery, or a stop: fenced as step_insert.sql is, on the task's row FOR SHARE and
--   only while this attempt's epoch is current and the task running. The supervisor's
--   re-queue waits for this statement's transaction, or this waits for it and then
--   matches nothing: nothing is written and the attempt is refused (`owned` false).
-- * A grant change: the context digest was recomputed from the authz_revision that
--   approval_read.sql read (%(revision)s). If a change has committed since, nothing is
--   written (`current` false) and the caller checks again against the new revision, so
--   an outcome is journaled only if it holds on the revision standing when it commits.
-- * Nothing else moves an approved package (a decision and the expiry sweep need
--   `pending`), so every move lands; the journal row is written only if all did.
WITH owned AS (
    SELECT t.id, t.tenant, t.epoch,
           coalesce((SELECT r.revision FROM steward_authz_revision r WHERE r.tenant = t.tenant), 0)
               = %(revision)s AS current
    FROM steward_task t
    WHERE t.id = %(task)s AND t.epoch = %(epoch)s AND t.status = 'running'
    FOR SHARE OF t
), go AS (
    SELECT id, tenant, epoch FROM owned WHERE current
), outcome AS (
    SELECT o.id, o.state, o.reason, o.changed::jsonb AS changed, o.n
    FROM unnest(%(ids)s::uuid[], %(states)s::text[], %(reasons)s::text[], %(changes)s::text[])
         WITH ORDINALITY AS o(id, state, reason, changed, n)
), moved AS (
    UPDATE steward_approval a
    SET state = o.state, stale_reason = o.reason, checked_at = now()
    FROM go, outcome o
    WHERE a.id = o.id AND a.task_id = go.id AND a.state = 'approved'
    RETURNING a.id
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, go.tenant, go.id, 'approval.' || o.state,
           jsonb_build_object('approval_id', o.id)
               || CASE WHEN o.reason <> '' THEN jsonb_build_object('reason', o.reason) ELSE '{}'::jsonb END
               || CASE WHEN o.changed <> '{}' THEN jsonb_build_object('changed', o.changed) ELSE '{}'::jsonb END
    FROM go, outcome o JOIN moved m ON m.id = o.id
    ORDER BY o.n
), journaled AS (
    -- step_insert.sql's row, here so that it commits with the moves.
    INSERT INTO steward_step (task_id, seq, name, kind, output, error, epoch, untrusted, started_at, finished_at)
    SELECT go.id, %(seq)s, %(name)s, 'approval_check', %(output)s::jsonb, NULL, go.epoch, false,
           clock_timestamp(), clock_timestamp()
    FROM go
    WHERE (SELECT count(*) FROM moved) = cardinality(%(ids)s::uuid[])
    ON CONFLICT (task_id, seq) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM owned) AS owned, EXISTS (SELECT 1 FROM go) AS current,
       (SELECT count(*) FROM moved) AS moved, EXISTS (SELECT 1 FROM journaled) AS journaled
