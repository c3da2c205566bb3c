-- The kill switch's lock on (tenant, agent), exclusive: see migration 0014.
SELECT steward_agent_switch_lock(%(tenant)s, %(agent)s, true)
