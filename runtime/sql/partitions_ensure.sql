-- The daily partitions of every partitioned table from today through %(through)s that do
-- not exist yet, created (runtime/lifecycle/partitions.py; the rules are the function's:
-- runtime/sql/schema/steward_partitions_ensure.sql). One row per partition created.
SELECT name FROM steward_partitions_ensure(%(through)s) AS name
