-- Whether a worker may have a capability token for one attempt, and the use of its
-- credential: checked, counted and audited in one statement (runtime/gateway/minting.py,
-- docs/adr/0034-token-minting.md). Every check reads current rows:
--   the credential exists, its secret's hash matches, and it is not revoked;
--   the task exists and its current epoch is the attempt's (a newer attempt supersedes);
--   that attempt is live (not ended), was claimed under THIS credential (a dense worker
--   holds many attempts under its one credential; another worker's are not its own),
--   its lease has not lapsed, and the task is still running (a stop closed it).
-- The first that fails is the refusal's reason. The credential's use is counted only
-- when a token is given (the UPDATE's own condition), and one audit event records the
-- mint or the refusal, on the task's chain when there is a task.
-- Races: a recovery or a stop may commit just after this snapshot; the token then
-- carries the epoch checked here, and the gateway refuses it (superseded_attempt or
-- task_stopped, runtime/sql/authz_decide.sql), so a mint never outlives its check.
WITH credential AS (
    SELECT c.revoked_at IS NOT NULL AS revoked
    FROM steward_worker_credential c
    WHERE c.id = %(credential)s AND c.secret_hash = %(secret_hash)s
), task AS (
    SELECT t.id, t.tenant, t.epoch, t.status FROM steward_task t WHERE t.id = %(task)s
), attempt AS (
    SELECT a.credential, a.lease_expires_at > now() AS live
    FROM steward_attempt a
    WHERE a.task_id = %(task)s AND a.epoch = %(epoch)s AND a.ended_at IS NULL
), verdict AS (
    SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM credential) THEN 'unknown'
        WHEN (SELECT revoked FROM credential) THEN 'revoked'
        WHEN NOT %(audience_ok)s THEN 'wrong_audience'  -- no gateway route: the model's or a tool's
        WHEN NOT EXISTS (SELECT 1 FROM task) THEN 'no_such_task'
        WHEN (SELECT epoch FROM task) <> %(epoch)s THEN 'stale_epoch'
        WHEN NOT EXISTS (SELECT 1 FROM attempt) THEN 'no_live_attempt'
        WHEN (SELECT credential FROM attempt) IS DISTINCT FROM %(credential)s THEN 'not_your_attempt'
        WHEN NOT (SELECT live FROM attempt) THEN 'lease_expired'
        WHEN (SELECT status FROM task) <> 'running' THEN 'task_stopped'
    END AS refused
), used AS (
    UPDATE steward_worker_credential c
    SET uses = c.uses + 1, last_used_at = now()
    WHERE c.id = %(credential)s AND c.revoked_at IS NULL AND (SELECT refused FROM verdict) IS NULL
    RETURNING c.id
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT 'worker_credential:' || %(credential)s, coalesce((SELECT tenant FROM task), ''), (SELECT id FROM task),
           CASE WHEN v.refused IS NULL THEN 'capability.minted' ELSE 'capability.refused' END,
           jsonb_strip_nulls(jsonb_build_object(
               'epoch', %(epoch)s::int, 'audience', %(audience)s::text, 'reason', v.refused,
               'task', %(task)s::text, 'boundary', 'credential_gateway'))
    FROM verdict v
)
SELECT (SELECT refused FROM verdict) AS refused, (SELECT count(*) FROM used) = 1 AS counted
