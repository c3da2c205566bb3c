-- Like fence.sql, but an exclusive lock: for writes that decide the task's own status
-- (ctx.wait checks its children under this lock; see wake_parent.sql).
SELECT t.tenant, t.pool FROM steward_task t
WHERE t.id = %(task)s AND t.epoch = %(epoch)s AND t.status = 'running'
FOR UPDATE
