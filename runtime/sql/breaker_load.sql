-- What a running attempt needs for its runaway breakers (runtime/limits/breakers.py):
-- an operator's limits for the task, and how long ago its first attempt started, on
-- the database's clock (the worker's may be off; it adds only its own monotonic time).
SELECT t.breaker_limits, extract(epoch FROM clock_timestamp() - t.started_at)::float8
FROM steward_task t
WHERE t.id = %(task)s
