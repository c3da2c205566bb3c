-- extends: authz_decide
-- The gateway's admission of one call, in one statement (one round trip, one snapshot,
-- its own transaction in autocommit): authz_decide's decision on current rows at
-- credential_gateway (recorded, and a denial audited), then the gateway's record of the
-- call: the token's use (jti, route), the task, its attempt (found by the unique
-- (task, epoch)), the journal step, the key, and the outcome so far. Nothing is
-- forwarded before this statement has committed, so a decision and its call row are
-- never apart and a call is never forwarded unrecorded.
--
-- A key whose call already committed for this task is a replay (a worker re-sending
-- after a lost answer): the row says `replayed` and returns the recorded output, and
-- nothing is forwarded. A key whose earlier send is still in flight (admitted less than
-- %(in_flight)s seconds ago: the gateway's own timeout) is `busy`: refused, nothing
-- forwarded, so a worker re-sending after a lost answer never makes a second provider
-- call while the first may still commit. A `partial` call (a stream cut) is neither: its
-- key is forwarded again, decided anew. Two sends inserted at the same instant do not
-- see each other and both forward; gateway_call_committed_key keeps the second from also
-- committing.
--
-- Its last act is to choose how its transaction commits: a denial always durably (it is
-- an audit event), an admission durably too unless %(durable)s is false
-- (docs/adr/0014-credential-gateway.md: then an admission costs no WAL flush, and a
-- PostgreSQL crash within a fraction of a second may lose the gateway's copy of it,
-- never the worker's ledger row). set_config(..., true) lasts to the end of the
-- transaction, which for a statement in autocommit is this statement's own commit.
, prior AS (
    SELECT c.response, c.receipt FROM steward_gateway_call c
    WHERE c.task_id = %(task)s AND c.idempotency_key = %(key)s AND c.outcome = 'committed'
), in_flight AS (
    SELECT 1 FROM steward_gateway_call c
    WHERE c.task_id = %(task)s AND c.idempotency_key = %(key)s AND c.outcome = 'admitted'
      AND c.started_at > statement_timestamp() - make_interval(secs => %(in_flight)s)
), opened AS (
    INSERT INTO steward_gateway_call (id, tenant, task_id, attempt_id, epoch, step_seq, jti, route, action,
                                      resource, idempotency_key, decision_id, outcome, started_at)
    SELECT steward_uuid7(statement_timestamp()), d.tenant, d.task_id,
           (SELECT a.id FROM steward_attempt a WHERE a.task_id = d.task_id AND a.epoch = %(epoch)s),
           %(epoch)s, %(step)s, %(jti)s, %(route)s, d.action, d.resource, %(key)s, d.id,
           CASE WHEN NOT d.allowed THEN 'denied' WHEN EXISTS (SELECT 1 FROM prior) THEN 'replayed'
                WHEN EXISTS (SELECT 1 FROM in_flight) THEN 'busy' ELSE 'admitted' END,
           statement_timestamp()
    FROM decided d
    RETURNING id, outcome
)
-- The decision's columns first, as authz_decide returns them, then the call's.
SELECT d.id, d.tenant, d.task_id, d.parent_task, d.epoch, d.actor, d.owner, d.boundary, d.action, d.resource,
       d.allowed, d.reason_code, d.policy_version, d.authz_revision, d.at,
       o.id AS call_id, o.outcome, (SELECT response FROM prior LIMIT 1) AS response,
       (SELECT receipt FROM prior LIMIT 1) AS receipt,
       -- a budget_exhausted denial's budget: which, its limit, what was counted
       (SELECT jsonb_build_object('scope', e.scope, 'limit', e.limit_tokens, 'used', e.used) FROM exhausted e
        WHERE d.reason_code = 'budget_exhausted') AS budget,
       set_config('synchronous_commit', CASE WHEN %(durable)s OR NOT d.allowed THEN 'on' ELSE 'off' END, true)
           AS synchronous_commit
FROM decided d, opened o
