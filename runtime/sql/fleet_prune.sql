-- The fleet's history is for the dashboard, not a record: processes gone for a while and
-- old minutes go (the audit trail is the record).
WITH gone AS (
    DELETE FROM steward_process WHERE seen_at < now() - %(processes)s::interval RETURNING 1
), old AS (
    DELETE FROM steward_process_minute WHERE minute < now() - %(minutes)s::interval RETURNING 1
)
SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM old) AS deleted
