-- One task's live attempts that it moved on without (cancelled, or re-queued and claimed
-- again) and whose lease has expired: the worker is gone and will never acknowledge.
-- The caller holds the task's rows (runtime/worker/supervisor.py), so the audit chain
-- this appends to is taken after the row, as everywhere else.
WITH ended AS (
    UPDATE steward_attempt a
    SET ended_at = now(), end_reason = 'abandoned'
    FROM steward_task t
    WHERE a.task_id = %(task)s AND a.ended_at IS NULL AND a.lease_expires_at < now()
      AND t.id = a.task_id AND NOT (t.status = 'running' AND t.epoch = a.epoch)
    RETURNING a.task_id, a.epoch, a.worker, t.tenant
), freed AS (
    UPDATE steward_slot s SET task_id = NULL, epoch = NULL, taken_at = NULL
    FROM ended WHERE s.task_id = ended.task_id AND s.epoch = ended.epoch
    RETURNING s.pool, s.task_id
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT %(actor)s, ended.tenant, ended.task_id, 'attempt.abandoned',
           jsonb_build_object('epoch', ended.epoch, 'worker', ended.worker,
                              'slot_freed', freed.pool IS NOT NULL)
    FROM ended LEFT JOIN freed ON freed.task_id = ended.task_id
)
SELECT freed.pool, ended.task_id, ended.epoch, ended.worker FROM ended LEFT JOIN freed ON freed.task_id = ended.task_id
