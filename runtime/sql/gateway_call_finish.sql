-- An admitted call ends once: committed (the provider answered), partial (a stream cut
-- short) or failed. Conditional on `admitted`: nothing else finishes a call, so a
-- second finish (a client going away after the stream's last chunk) changes nothing.
-- A committed call whose key another committed first (two sends racing) is recorded
-- partial instead of breaking gateway_call_committed_key.
-- It commits without waiting for the WAL flush (the caller's SET LOCAL): the receipt is
-- durable in the worker's ledger already, and a crash that loses this copy leaves the
-- call `admitted`, which says a call was forwarded and did not report back.
-- It returns the stop of the call's task if that is no longer running: the gateway
-- then sees whether this was the stop's last call in flight (gateway_stop_report.sql).
-- The task row is read FOR KEY SHARE whatever its status (a lock is taken only on the
-- rows a WHERE keeps), ordered against a stop's FOR UPDATE of it: a stop
-- that commits first is seen here (the row's latest version), and a stop that comes
-- after this commit sees the call ended (runtime/stops/services.py _locked_tree), so
-- one of the two always acknowledges for the gateway.
UPDATE steward_gateway_call c
SET outcome = CASE WHEN %(outcome)s = 'committed' AND EXISTS (
                       SELECT 1 FROM steward_gateway_call o
                       WHERE o.task_id = c.task_id AND o.idempotency_key = c.idempotency_key
                         AND o.outcome = 'committed')
                   THEN 'partial' ELSE %(outcome)s END,
    status = %(status)s, receipt = %(receipt)s::jsonb, response = %(response)s::jsonb,
    finished_at = statement_timestamp()
WHERE c.id = %(id)s AND c.outcome = 'admitted'
