-- Move the stopped tasks to `stopping` under their stop, each with its deadline
-- (%(after)s seconds from now, matching %(ids)s by position). Their rows are locked by
-- stop_tree.sql in this transaction, so the statuses it read still hold. Timers, waits
-- and the queue place are dropped: nothing wakes or claims a stopping task.
UPDATE steward_task t
SET status = 'stopping', stop_id = %(stop)s, stop_deadline = now() + make_interval(secs => d.after),
    wake_at = NULL, waiting_on = NULL, status_note = %(note)s, updated_at = now()
FROM unnest(%(ids)s::uuid[], %(after)s::float8[]) AS d(id, after)
WHERE t.id = d.id AND t.status IN ('blocked', 'dead', 'queued', 'running', 'sleeping', 'waiting')
