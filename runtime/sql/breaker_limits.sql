-- The agent and an operator's limits of one task: what runtime/limits/breakers.py's
-- limits_of() reads before a spawn whose caller did not bring the limits.
SELECT agent, breaker_limits FROM steward_task WHERE id = %(task)s
