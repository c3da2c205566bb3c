-- One authorize() decision in one statement: walk the task's lineage up to its root,
-- check at every level the agent's and the owner's live grants and what that level asked
-- for at spawn, record the decision and, for a denial, its audit row in the task's chain.
-- One statement is one snapshot (READ COMMITTED): the grants evaluated and the
-- authz_revision recorded are of the same instant, so a decision never names a revision
-- whose narrowing it did not see. A grant committed after the snapshot is seen by the
-- next call: every check reads current rows (docs/adr/0013-authority-and-capability-tokens.md).
--
-- A resource pattern `p*` covers what starts with `p`; otherwise a grant covers its exact
-- value (runtime/authz/patterns.py covers()). Expiry is against statement_timestamp(),
-- not now(): a caller inside a long transaction must not see a grant as live past its expiry.
--
-- A capability token (%(bound_epoch)s given) is only good while its task is `running`:
-- a stopping or cancelled task's token is denied task_stopped (runtime/stops/). Its task
-- row is read FOR KEY SHARE, which a stop's FOR UPDATE of the tree (stop_tree.sql)
-- waits for and which waits for it: either the stop commits first and this read sees
-- `stopping` (the latest version, not the statement's snapshot), or this call's row is
-- committed before the stop looks for calls in flight. No call slips between them.
WITH RECURSIVE lineage AS (
    SELECT t.id, t.parent_id, t.tenant, t.agent, t.owner, t.requested_scope, t.epoch, 0 AS depth
    FROM steward_task t WHERE t.id = %(task)s
    UNION ALL
    SELECT p.id, p.parent_id, p.tenant, p.agent, p.owner, p.requested_scope, p.epoch, l.depth + 1
    FROM lineage l JOIN steward_task p ON p.id = l.parent_id
), bound AS (
    SELECT t.status FROM steward_task t WHERE t.id = %(task)s AND %(bound_epoch)s::int IS NOT NULL
    FOR KEY SHARE
), levels AS (
    SELECT l.depth, l.tenant,
           bool_or(g.principal = 'agent:' || l.agent AND g.live) AS agent_live,
           bool_or(g.principal = 'agent:' || l.agent AND NOT g.live) AS agent_expired,
           bool_or(g.principal = l.owner AND g.live) AS owner_live,
           bool_or(g.principal = l.owner AND NOT g.live) AS owner_expired,
           l.requested_scope IS NULL OR EXISTS (
               SELECT 1 FROM jsonb_array_elements(l.requested_scope) s
               WHERE s ->> 'action' = %(action)s
                 AND CASE WHEN right(s ->> 'resource', 1) = '*'
                          THEN starts_with(%(resource)s, left(s ->> 'resource', -1))
                          ELSE s ->> 'resource' = %(resource)s END) AS asked
    FROM lineage l
    LEFT JOIN LATERAL (
        -- grant_live: (tenant, principal, action) WHERE revoked_at IS NULL
        SELECT g.principal, g.expires_at IS NULL OR g.expires_at > statement_timestamp() AS live
        FROM steward_grant g
        WHERE g.tenant = l.tenant AND g.principal IN ('agent:' || l.agent, l.owner)
          AND g.action = %(action)s AND g.revoked_at IS NULL
          AND CASE WHEN right(g.resource, 1) = '*' THEN starts_with(%(resource)s, left(g.resource, -1))
                   ELSE g.resource = %(resource)s END
    ) g ON true
    GROUP BY l.depth, l.tenant, l.requested_scope
), spent AS MATERIALIZED (
    -- Token budgets (%(budgeted)s: the credential gateway's model calls only): each of the
    -- tenant's budgets that the counted usage has reached, nearest first (task, tree,
    -- tenant). A tree is the task's root and all below it. Usage is what finished calls
    -- counted (gateway_call_finish.sql), so a call in flight may overshoot by its own
    -- size (docs/adr/0019-budgets.md). Only for a tenant with a budget row.
    SELECT s.n, s.scope, s.limit_tokens,
           coalesce((SELECT sum(u.tokens) FROM steward_token_usage u
                     WHERE u.scope = s.scope AND u.subject = s.subject), 0)::bigint AS used
    FROM lineage me
    JOIN steward_budget b ON b.tenant = me.tenant AND %(budgeted)s::bool
    CROSS JOIN LATERAL (VALUES (1, 'task', me.id::text, b.task_tokens),
                               (2, 'tree', (SELECT r.id FROM lineage r WHERE r.parent_id IS NULL)::text,
                                b.tree_tokens),
                               (3, 'tenant', me.tenant::text, b.tenant_tokens)) s(n, scope, subject, limit_tokens)
    WHERE me.depth = 0 AND s.limit_tokens IS NOT NULL
), exhausted AS MATERIALIZED (
    SELECT s.scope, s.limit_tokens, s.used FROM spent s WHERE s.used >= s.limit_tokens ORDER BY s.n LIMIT 1
), verdict AS MATERIALIZED (
    -- MATERIALIZED: the INSERT below reads v.reason three times, and an inlined CTE would
    -- plan and run this subquery once per reading (measured: half the planning and half
    -- the execution time of the whole statement with it).
    -- The first failing check, nearest the task first; within the task itself, in the
    -- order agent, owner, asked. Any failure above the task is its parent's lack.
    -- `refuse`: a reason the caller already found (a token bound to another tenant,
    -- task or attempt: runtime/authz/tokens.py), recorded the same way without a look.
    -- `bound_tenant`, `bound_epoch`: what a capability token says it is bound to, checked
    -- here against the task's row rather than by a read before this statement.
    SELECT coalesce(%(refuse)s::text,
        CASE WHEN %(bound_tenant)s::text IS NOT NULL AND me.tenant <> %(bound_tenant)s::text THEN 'tenant_mismatch'
             WHEN %(bound_epoch)s::int IS NOT NULL AND me.epoch <> %(bound_epoch)s::int THEN 'superseded_attempt'
             WHEN %(bound_epoch)s::int IS NOT NULL AND (SELECT b.status FROM bound b) <> 'running' THEN 'task_stopped'
        END, (
        SELECT CASE
            WHEN lv.tenant <> me.tenant THEN 'tenant_mismatch'
            WHEN lv.depth > 0 THEN 'parent_lacks'
            WHEN NOT coalesce(lv.agent_live, false) AND coalesce(lv.agent_expired, false) THEN 'grant_expired'
            WHEN NOT coalesce(lv.agent_live, false) THEN 'no_grant_agent'
            WHEN NOT coalesce(lv.owner_live, false) AND coalesce(lv.owner_expired, false) THEN 'grant_expired'
            WHEN NOT coalesce(lv.owner_live, false) THEN 'no_grant_owner'
            ELSE 'not_requested' END
        FROM levels lv
        WHERE lv.tenant <> me.tenant OR NOT (coalesce(lv.agent_live, false) AND coalesce(lv.owner_live, false)
                                             AND lv.asked)
        ORDER BY lv.tenant <> me.tenant DESC, lv.depth
        LIMIT 1),
        -- Authority holds; then what it may spend: a token budget reached, and the
        -- caller's quota verdict (%(quota)s: quota_exceeded or quota_unavailable, from
        -- runtime/limits/quotas.py, counted before this statement).
        (SELECT 'budget_exhausted' FROM exhausted), %(quota)s::text, 'granted') AS reason
    FROM lineage me WHERE me.depth = 0
), decided AS (
    INSERT INTO steward_decision (id, tenant, task_id, parent_task, epoch, actor, owner, boundary, action,
                                  resource, allowed, reason_code, policy_version, authz_revision, at)
    SELECT steward_uuid7(statement_timestamp()), me.tenant, me.id, me.parent_id,
           coalesce(%(epoch)s::int, me.epoch), coalesce(%(actor)s::text, 'agent:' || me.agent), me.owner,
           CASE WHEN v.reason = 'tenant_mismatch' THEN 'tenant_isolation' ELSE %(boundary)s END,
           %(action)s, %(resource)s, v.reason = 'granted', v.reason, %(policy)s,
           coalesce((SELECT r.revision FROM steward_authz_revision r WHERE r.tenant = me.tenant), 0),
           statement_timestamp()
    FROM lineage me, verdict v WHERE me.depth = 0
    RETURNING *
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT d.actor, d.tenant, d.task_id, 'authz.denied',
           %(extra)s::jsonb || jsonb_build_object(
               'decision_id', d.id, 'boundary', d.boundary, 'reason_code', d.reason_code,
               'action', d.action, 'resource', d.resource, 'owner', d.owner, 'epoch', d.epoch,
               'parent_task', d.parent_task, 'policy_version', d.policy_version,
               'authz_revision', d.authz_revision)
           || CASE WHEN d.reason_code = 'budget_exhausted' THEN (
                  SELECT jsonb_build_object('budget', jsonb_build_object(
                      'scope', e.scope, 'limit', e.limit_tokens, 'used', e.used)) FROM exhausted e)
                   ELSE '{}'::jsonb END
    FROM decided d WHERE NOT d.allowed
)
-- result: (a statement that extends this one, `-- extends: authz_decide`, replaces what follows)
SELECT id, tenant, task_id, parent_task, epoch, actor, owner, boundary, action, resource, allowed,
       reason_code, policy_version, authz_revision, at
FROM decided
