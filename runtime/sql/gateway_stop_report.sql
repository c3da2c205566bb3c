-- What the credential gateway did for one task's stop (%(stop)s): its calls in flight
-- when the stop was requested are those still admitted and those that ended since
-- (nothing of a stopping task is admitted after the stop commits: authz_decide.sql).
-- `open` counts the calls still in flight (admitted within the gateway's own timeout):
-- while any is, the gateway has not finished answering. An admitted call older than
-- that never reported back (its gateway process died, say): unresolved, for good.
-- The cut ones are those the gateway ended because of the stop (receipt.cut_by).
WITH s AS (
    SELECT requested_at FROM steward_stop WHERE id = %(stop)s
), calls AS (
    SELECT c.id, c.outcome, c.receipt ->> 'cut_by' AS cut_by,
           c.started_at > statement_timestamp() - make_interval(secs => %(in_flight)s::float8) AS in_flight
    FROM steward_gateway_call c, s
    WHERE c.task_id = %(task)s AND c.outcome IN ('admitted', 'committed', 'partial', 'unknown', 'failed')
      AND (c.outcome = 'admitted' OR c.finished_at >= s.requested_at)
)
SELECT (SELECT count(*) FROM calls WHERE outcome = 'admitted' AND in_flight) AS open_calls,
       ARRAY(SELECT id::text FROM calls WHERE outcome <> 'admitted' AND cut_by = 'task_stopped' ORDER BY id) AS cut,
       ARRAY(SELECT id::text FROM calls WHERE outcome <> 'admitted' AND cut_by IS DISTINCT FROM 'task_stopped'
             ORDER BY id) AS finished,
       ARRAY(SELECT id::text FROM calls WHERE outcome = 'admitted' AND NOT in_flight ORDER BY id) AS unresolved,
       (SELECT count(*) FROM steward_decision d, s
        WHERE d.task_id = %(task)s AND d.reason_code = 'task_stopped' AND d.at >= s.requested_at) AS refused
FROM s
