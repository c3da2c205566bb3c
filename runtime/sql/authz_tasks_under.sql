-- The live tasks acting under a principal in a tenant: those whose agent (agent:<name>)
-- or owner it is, and every live task below one of them, whose authority is bounded by
-- its ancestors' (authz_decide.sql). Walked upward from each live task (task_tenant_status_id,
-- then primary-key lookups) rather than down from the matches: steward_task has no index
-- on parent, and a finished ancestor still bounds its live descendants.
-- grant_revoke records this count in its audit event inside the same transaction as the
-- revocation, so the preview an operator read (same statement) says what was recorded.
WITH RECURSIVE live AS (
    SELECT t.id, t.parent_id, t.agent, t.owner, t.status
    FROM steward_task t
    WHERE t.tenant = %(tenant)s AND t.status = ANY (%(live)s)  -- states.LIVE
), up AS (
    SELECT l.id AS task_id, l.parent_id, l.agent, l.owner FROM live l
    UNION ALL
    SELECT up.task_id, p.parent_id, p.agent, p.owner
    FROM up JOIN steward_task p ON p.id = up.parent_id
)
SELECT l.id, l.agent, l.status
FROM live l
WHERE EXISTS (SELECT 1 FROM up WHERE up.task_id = l.id
                                  AND ('agent:' || up.agent = %(principal)s OR up.owner = %(principal)s))
ORDER BY l.id
