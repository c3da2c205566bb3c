-- Mark this connection as running agent code for %(task)s ('' when it is done): the
-- trigger of migration 0012 then refuses every write to steward_grant made on it,
-- through a service or the ORM, whatever actor the code names. Session-level (false):
-- it outlives the attempt's transactions, and is called outside any transaction so
-- no rollback undoes it.
SELECT set_config('steward.agent_task', %(task)s, false)
