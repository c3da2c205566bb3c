-- End the running attempt and move the task to %(target)s, in one statement: the status
-- change, the attempt's end, the slot's release and the audit row commit together.
--
-- The WHERE clause is the fence: it matches only while this attempt's epoch is current
-- and the task is still running. A supervisor that re-queued the task after a lease
-- expiry, or an operator who cancelled it, got there first; then nothing changes and
-- the caller learns it lost (no row returned).
--
-- A yield (the database failed under the attempt) re-queues the task, and counts as an
-- abnormal end like a lease expiry: after MAX_CRASHES of those in a row the task is
-- dead-lettered for an operator instead of being retried forever.
WITH moved AS (
    UPDATE steward_task t
    SET status = CASE WHEN %(event)s::text = 'yield' AND t.crash_count + 1 >= %(max_crashes)s::integer
                      THEN 'dead' ELSE %(target)s::text END,
        output = %(output)s::jsonb,
        error = %(error)s::jsonb,
        wake_at = %(wake_at)s::timestamptz,
        waiting_on = %(waiting_on)s::uuid[],
        status_note = %(note)s,
        -- Into blocked: why (effect_unknown, authority_denied, breaker_tripped) and, for a
        -- denial, its decision, for a trip, its breaker. Any other end clears them (a
        -- blocked task is never running).
        blocked_reason = %(blocked_reason)s::text,
        blocked_decision_id = %(blocked_decision)s::uuid,
        breaker = %(breaker)s::text,
        next_reason = %(next_reason)s,
        queued_at = CASE WHEN %(target)s::text = 'queued' THEN now() ELSE t.queued_at END,
        finished_at = CASE WHEN %(terminal)s::boolean THEN now() ELSE NULL END,
        crash_count = CASE WHEN %(event)s::text = 'yield' THEN t.crash_count + 1 ELSE 0 END,
        updated_at = now()
    WHERE t.id = %(task)s AND t.epoch = %(epoch)s AND t.status = 'running'
    RETURNING t.id, t.tenant, t.pool, t.status
), ended AS (
    UPDATE steward_attempt a
    SET ended_at = now(), end_reason = %(end_reason)s
    FROM moved
    WHERE a.task_id = moved.id AND a.epoch = %(epoch)s AND a.ended_at IS NULL
), freed AS (
    UPDATE steward_slot s
    SET task_id = NULL, epoch = NULL, taken_at = NULL
    FROM moved
    WHERE s.task_id = moved.id
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, moved.tenant, moved.id, 'task.' || moved.status,
           %(data)s::jsonb
    FROM moved
)
SELECT moved.pool, moved.status FROM moved
