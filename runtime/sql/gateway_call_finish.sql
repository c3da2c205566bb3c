-- An admitted call ends once: committed (the provider answered), partial (a stream cut
-- short) or failed. Conditional on `admitted`: nothing else finishes a call, so a
-- second finish (a client going away after the stream's last chunk) changes nothing.
-- A committed call whose key another committed first (two sends racing) is recorded
-- partial instead of breaking gateway_call_committed_key.
-- It commits without waiting for the WAL flush (its RETURNING sets synchronous_commit
-- off for its own transaction: it runs in autocommit, so one round trip in all): the
-- receipt is durable in the worker's ledger already, and a crash that loses this copy
-- leaves the call `admitted`, which says a call was forwarded and did not report back.
UPDATE steward_gateway_call c
SET outcome = CASE WHEN %(outcome)s = 'committed' AND EXISTS (
                       SELECT 1 FROM steward_gateway_call o
                       WHERE o.task_id = c.task_id AND o.idempotency_key = c.idempotency_key
                         AND o.outcome = 'committed')
                   THEN 'partial' ELSE %(outcome)s END,
    status = %(status)s, receipt = %(receipt)s::jsonb, response = %(response)s::jsonb,
    finished_at = statement_timestamp()
WHERE c.id = %(id)s AND c.outcome = 'admitted'
RETURNING set_config('synchronous_commit', 'off', true)
