-- An admitted call ends once: committed (the provider answered), partial (a stream cut
-- short; unknown for an unkeyed call, which gateway_finish decides) or failed. Conditional on `admitted`: nothing else finishes a call, so a
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
--
-- The call's model tokens (%(tokens)s, 0 for a tool call) are kept on its row and added,
-- in the same statement, to its task's, its tree's and its tenant's running totals
-- (steward_token_usage), in that order (always the same order: two finishes never wait
-- on each other's rows crosswise), to the shard of this backend: finishes of one
-- tenant on other connections mostly write other rows. Only a call this statement
-- ended adds: a second finish adds nothing.
WITH task AS MATERIALIZED (
    SELECT t.status, t.stop_id, t.root_id
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
        finished_at = clock_timestamp(), tokens = %(tokens)s::bigint
    WHERE c.id = %(id)s AND c.outcome = 'admitted' AND EXISTS (SELECT 1 FROM task)
    RETURNING c.id, c.tenant, c.task_id
), counted AS (
    INSERT INTO steward_token_usage AS u (tenant, scope, subject, shard, tokens, calls, updated_at)
    SELECT d.tenant, s.scope, s.subject, pg_backend_pid() %% 8, %(tokens)s::bigint, 1, statement_timestamp()
    FROM done d, task t,
         LATERAL (VALUES (1, 'task', d.task_id::text), (2, 'tree', coalesce(t.root_id, d.task_id)::text),
                         (3, 'tenant', d.tenant::text)) s(n, scope, subject)
    WHERE %(tokens)s::bigint > 0
    ORDER BY s.n
    ON CONFLICT (scope, subject, shard) DO UPDATE
        SET tokens = u.tokens + excluded.tokens, calls = u.calls + 1, updated_at = excluded.updated_at
)
SELECT (SELECT count(*) FROM done) = 1 AS ended, (SELECT status FROM task) AS status,
       (SELECT stop_id FROM task) AS stop_id, set_config('synchronous_commit', 'off', true) AS synchronous_commit
