-- An admitted call ends once: committed (the provider answered), partial (a stream cut
-- short) or failed. Conditional on `admitted`: nothing else finishes a call, so a
-- second finish (a client going away after the stream's last chunk) changes nothing.
-- A committed call whose key another committed first (two sends racing) is recorded
-- partial instead of breaking gateway_call_committed_key.
-- It commits without waiting for the WAL flush (its last column sets synchronous_commit
-- off for its own transaction: it runs in autocommit, so one round trip in all): the
-- receipt is durable in the worker's ledger already, and a crash that loses this copy
-- leaves the call `admitted`, which says a call was forwarded and did not report back.
-- It returns the call's task's status and stop: if the task no longer runs, the gateway
-- then sees whether this was the stop's last call in flight (gateway_stop_report.sql).
-- The task row is read FOR KEY SHARE first (the UPDATE's EXISTS makes it an initplan,
-- run before any row is changed), ordered against a stop's FOR UPDATE of it: a stop
-- that commits first is seen here (the row's latest version after the wait, and
-- finished_at, the clock's time, comes after it), and a stop that comes after this
-- commit sees the call ended (runtime/stops/services.py), so one of the two always
-- acknowledges for the gateway.
WITH task AS MATERIALIZED (
    SELECT t.status, t.stop_id
    FROM steward_task t
    WHERE t.id = (SELECT c.task_id FROM steward_gateway_call c WHERE c.id = %(id)s)
    FOR KEY SHARE
), done AS (
    UPDATE steward_gateway_call c
    SET outcome = CASE WHEN %(outcome)s = 'committed' AND EXISTS (
                           SELECT 1 FROM steward_gateway_call o
                           WHERE o.task_id = c.task_id AND o.idempotency_key = c.idempotency_key
                             AND o.outcome = 'committed')
                       THEN 'partial' ELSE %(outcome)s END,
        status = %(status)s, receipt = %(receipt)s::jsonb, response = %(response)s::jsonb,
        finished_at = clock_timestamp()
    WHERE c.id = %(id)s AND c.outcome = 'admitted' AND EXISTS (SELECT 1 FROM task)
    RETURNING c.id
)
SELECT (SELECT count(*) FROM done) = 1, (SELECT status FROM task), (SELECT stop_id FROM task),
       set_config('synchronous_commit', 'off', true)
