-- One boundary's acknowledgment of one task's stop; nothing when that boundary already
-- answered it (each answers once). The trigger of migration 0014 refuses it from a
-- connection running agent code.
INSERT INTO steward_stop_ack (stop_id, task_id, boundary, "by", detail, at)
VALUES (%(stop)s, %(task)s, %(boundary)s, %(by)s, %(detail)s::jsonb, now())
ON CONFLICT (stop_id, task_id, boundary) DO NOTHING
RETURNING id
