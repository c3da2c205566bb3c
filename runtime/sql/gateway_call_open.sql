-- The gateway's record of one call, written right after its decision: the token's use
-- (jti, route), the task, its attempt (found by the unique (task, epoch)), the journal
-- step, the key, and the outcome so far. A key whose call already committed for this
-- task is a replay (a worker re-sending after a lost answer): the row says `replayed`
-- and returns the recorded output, and nothing is forwarded. A key whose earlier send
-- is still in flight (admitted less than %(in_flight)s seconds ago: the gateway's own
-- timeout) is `busy`: refused, nothing forwarded, so a worker re-sending after a lost
-- answer never makes a second provider call while the first may still commit. Two
-- sends inserted at the same instant do not see each other and both forward;
-- gateway_call_committed_key keeps the second from also committing.
--
-- It runs in the transaction of the call's decision, and its last act is to choose how
-- that transaction commits: a denial always durably (it is an audit event), an
-- admission durably too unless %(durable)s is false (docs/adr/0014-credential-gateway.md:
-- then an admission costs no WAL flush, and a PostgreSQL crash within a fraction of a
-- second may lose the gateway's copy of it, never the worker's ledger row).
WITH prior AS (
    SELECT c.response, c.receipt FROM steward_gateway_call c
    WHERE c.task_id = %(task)s AND c.idempotency_key = %(key)s AND c.outcome = 'committed'
), in_flight AS (
    SELECT 1 FROM steward_gateway_call c
    WHERE c.task_id = %(task)s AND c.idempotency_key = %(key)s AND c.outcome = 'admitted'
      AND c.started_at > statement_timestamp() - make_interval(secs => %(in_flight)s)
)
INSERT INTO steward_gateway_call (id, tenant, task_id, attempt_id, epoch, step_seq, jti, route, action, resource,
                                  idempotency_key, decision_id, outcome, started_at)
SELECT steward_uuid7(statement_timestamp()), %(tenant)s, %(task)s,
       (SELECT a.id FROM steward_attempt a WHERE a.task_id = %(task)s AND a.epoch = %(epoch)s),
       %(epoch)s, %(step)s, %(jti)s, %(route)s, %(action)s, %(resource)s, %(key)s, %(decision)s,
       CASE WHEN NOT %(allowed)s THEN 'denied' WHEN EXISTS (SELECT 1 FROM prior) THEN 'replayed'
            WHEN EXISTS (SELECT 1 FROM in_flight) THEN 'busy' ELSE 'admitted' END,
       statement_timestamp()
RETURNING id, outcome, (SELECT response FROM prior LIMIT 1), (SELECT receipt FROM prior LIMIT 1),
          set_config('synchronous_commit', CASE WHEN %(durable)s OR NOT %(allowed)s THEN 'on' ELSE 'off' END, true)
