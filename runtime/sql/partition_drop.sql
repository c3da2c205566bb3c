-- Detach and drop %(table)s's partitions whose whole range ends at or before %(cutoff)s
-- (runtime/lifecycle/partitions.py; the rules are the function's:
-- runtime/sql/schema/steward_partition_drop.sql). One row per partition looked at: its
-- name, the end of its range as a time, and whether it was dropped or why it stays.
SELECT partition, upper_at, outcome FROM steward_partition_drop(%(table)s, %(cutoff)s)
