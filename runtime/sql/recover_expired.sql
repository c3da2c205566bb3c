-- Recover running tasks whose current attempt's lease expired. The FOR UPDATE SKIP
-- LOCKED on the task row means a second supervisor passes over a task this one is
-- recovering, and a worker's fenced write in flight (FOR SHARE) finishes first. The
-- attempt UPDATE re-checks the lease, so a heartbeat that landed meanwhile wins.
-- A recovered task keeps its queued_at, so it is claimed before tasks queued after it.
WITH expired AS (
    SELECT t.id, t.epoch
    FROM steward_task t
    JOIN steward_attempt a ON a.task_id = t.id AND a.epoch = t.epoch
    WHERE t.status = 'running' AND a.ended_at IS NULL AND a.lease_expires_at < now()
    ORDER BY a.lease_expires_at
    LIMIT 200
    FOR UPDATE OF t SKIP LOCKED
), ended AS (
    UPDATE steward_attempt a
    SET ended_at = now(), end_reason = 'lease_expired'
    FROM expired
    WHERE a.task_id = expired.id AND a.epoch = expired.epoch AND a.ended_at IS NULL
      AND a.lease_expires_at < now()
    RETURNING a.task_id, a.epoch, a.worker
), moved AS (
    UPDATE steward_task t
    SET status = CASE WHEN t.crash_count + 1 >= %(max_crashes)s THEN 'dead' ELSE 'queued' END,
        crash_count = t.crash_count + 1,
        next_reason = 'recovery',
        -- Back to its old place in the claim order (queued_at, id), ahead of work queued
        -- after it: a crash must not send admitted work to the back of a long queue, or
        -- a takeover waits on everything submitted since (docs/performance.md, issue 19).
        queued_at = coalesce(t.queued_at, now()),
        status_note = CASE WHEN t.crash_count + 1 >= %(max_crashes)s
                           THEN 'dead-lettered: its worker died ' || (t.crash_count + 1) || ' times in a row'
                           ELSE 'recovering: the lease of attempt ' || t.epoch || ' expired' END,
        updated_at = now()
    FROM ended
    WHERE t.id = ended.task_id AND t.epoch = ended.epoch AND t.status = 'running'
    RETURNING t.id, t.tenant, t.pool, t.status, t.epoch, t.crash_count, ended.worker
), freed AS (
    UPDATE steward_slot s SET task_id = NULL, epoch = NULL, taken_at = NULL
    FROM moved WHERE s.task_id = moved.id
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, moved.tenant, moved.id,
           CASE WHEN moved.status = 'dead' THEN 'task.dead' ELSE 'task.recovered' END,
           jsonb_build_object('epoch', moved.epoch, 'worker', moved.worker,
                              'crash_count', moved.crash_count)
    FROM moved
)
SELECT pool, status FROM moved
