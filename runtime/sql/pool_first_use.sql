-- A pool created at its first use (a submit, a spawn, a schedule naming the default pool
-- or an agent's declared pool), through steward_pool_first_use(): the worker role holds
-- no INSERT on steward_pool (migration 0027), and this adds a missing pool, never changes
-- or removes one. A concurrent first use waits on the name and then adds nothing.
SELECT steward_pool_first_use(%(name)s, %(max_running)s, %(max_queued)s) AS created
