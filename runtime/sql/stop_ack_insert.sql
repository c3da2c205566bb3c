-- One boundary's acknowledgment of one task's stop; nothing when that boundary already
-- answered it (each answers once). The trigger of migration 0014 refuses it from a
-- connection running agent code.
-- `at` is this transaction's time, the stop's clock (runtime/models/stop.py), and never
-- before the request: a transaction that began before the stop's and then waited for
-- its locks would read an earlier now(), for an answer that came after the request.
INSERT INTO steward_stop_ack (stop_id, task_id, boundary, "by", detail, at)
SELECT %(stop)s, %(task)s, %(boundary)s, %(by)s, %(detail)s::jsonb, greatest(now(), s.requested_at)
FROM steward_stop s WHERE s.id = %(stop)s
ON CONFLICT (stop_id, task_id, boundary) DO NOTHING
RETURNING id
