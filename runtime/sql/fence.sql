-- The first statement of every multi-statement write by an attempt: it holds the task
-- row in SHARE mode until commit, so recovery cannot re-queue the task mid-write, and
-- it finds nothing once a newer attempt (or a stop) has moved the task on.
SELECT t.tenant, t.pool FROM steward_task t
WHERE t.id = %(task)s AND t.epoch = %(epoch)s AND t.status = 'running'
FOR SHARE
