-- Journal one step, fenced by the attempt's epoch.
-- FOR SHARE makes this race-free against recovery: the supervisor's UPDATE of the task
-- row (status running -> queued) waits for this statement's transaction, or this
-- statement waits for it and then re-checks epoch and status on the new row version
-- and inserts nothing. A frozen worker that thaws therefore journals nothing.
-- Both times are the database's clock: the worker measures only how long the step took.
-- `untrusted`: the output came from a model or a tool (evidence, never authority).
INSERT INTO steward_step (task_id, seq, name, kind, output, error, epoch, untrusted, started_at, finished_at)
SELECT t.id, %(seq)s, %(name)s, %(kind)s, %(output)s::jsonb, %(error)s::jsonb, t.epoch, %(untrusted)s::boolean,
       clock_timestamp() - make_interval(secs => %(took)s::float8), clock_timestamp()
FROM steward_task t
WHERE t.id = %(task)s AND t.epoch = %(epoch)s AND t.status = 'running'
FOR SHARE
ON CONFLICT (task_id, seq) DO NOTHING
