-- The partitions of %(table)s but the default one, oldest first, each with its range as
-- times: an audit partition's bounds are times, the others' UUIDv7s (their minting
-- time). lower_at is NULL for the legacy partition (from MINVALUE: migration 0032).
SELECT name, lower_at, upper_at
FROM (
    SELECT c.relname AS name,
           substring(pg_get_expr(c.relpartbound, c.oid) FROM $re$FROM \('([^']*)'\)$re$) AS lo,
           substring(pg_get_expr(c.relpartbound, c.oid) FROM $re$TO \('([^']*)'\)$re$) AS hi
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = %(table)s::text::regclass
) p
CROSS JOIN LATERAL (
    SELECT CASE WHEN %(table)s::text = 'steward_audit' THEN p.lo::timestamptz ELSE steward_uuid7_time(p.lo::uuid) END
               AS lower_at,
           CASE WHEN %(table)s::text = 'steward_audit' THEN p.hi::timestamptz ELSE steward_uuid7_time(p.hi::uuid) END
               AS upper_at
) t
WHERE p.hi IS NOT NULL
ORDER BY upper_at
