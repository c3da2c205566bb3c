-- What a running attempt needs for its breakers (runtime/limits/breakers.py): an
-- operator's limits for the task, how long ago its first attempt started, on the
-- database's clock (the worker's may be off; it adds only its own monotonic time), and
-- its tree's open pause, if any (the tree_pause_one_open index).
SELECT t.breaker_limits, extract(epoch FROM clock_timestamp() - t.started_at)::float8 AS age,
       (SELECT p.id FROM steward_tree_pause p WHERE p.root_id = t.root_id AND p.released_at IS NULL) AS pause_id
FROM steward_task t
WHERE t.id = %(task)s
