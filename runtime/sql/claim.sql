-- Claim the oldest queued task of a pool, take one of the pool's free slots, start a new
-- attempt (epoch + 1) with its lease, and audit it: one statement, one round trip.
--
-- Races: several workers run this at once for the same pool. SKIP LOCKED sends each to
-- a different task and a different slot instead of queueing them behind one another.
-- If no slot is free, `next` still locked a task row but nothing else happens and the
-- task stays queued; whoever frees a slot next claims it (runtime/worker/executor.py).
--
-- Versions (docs/adr/0037-agent-versions.md): a worker claims only the tasks whose
-- (agent, agent_version) it serves, %(agents)s and %(versions)s being its pairs as two
-- parallel arrays (runtime/agents.py served()); "" is a task submitted before versions,
-- which any worker may run. A task no live worker serves stays queued ("waiting for
-- version"): it is passed over here, not failed. The filter is applied as the claim
-- order's index is walked, so such tasks at the head of a queue cost a row each.
WITH served AS (
    SELECT a.agent, a.version FROM unnest(%(agents)s::text[], %(versions)s::text[]) AS a(agent, version)
), next AS (
    SELECT t.id
    FROM steward_task t
    WHERE t.pool = %(pool)s AND t.status = 'queued'
      AND (t.agent_version = ''
           OR EXISTS (SELECT 1 FROM served s WHERE s.agent = t.agent AND s.version = t.agent_version))
    ORDER BY t.queued_at, t.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), slot AS (
    SELECT s.id
    FROM steward_slot s JOIN steward_pool p ON p.name = s.pool
    -- Slots numbered past max_running are left over from a shrink and never handed out.
    WHERE s.pool = %(pool)s AND s.task_id IS NULL AND s.number < p.max_running
      AND EXISTS (SELECT 1 FROM next)
    LIMIT 1
    FOR UPDATE OF s SKIP LOCKED
), claimed AS (
    -- `id = (SELECT ...)` keeps this a primary-key update whatever the statistics say.
    UPDATE steward_task t
    SET status = 'running', epoch = t.epoch + 1, updated_at = now(),
        started_at = coalesce(t.started_at, now()), status_note = ''
    WHERE t.id = (SELECT id FROM next) AND EXISTS (SELECT 1 FROM slot) AND t.status = 'queued'
    RETURNING t.id, t.epoch, t.next_reason, t.agent, t.agent_version, t.input, t.tenant, t.owner,
              t.parent_id, t.root_id, t.pool, t.queued_at
), took AS (
    UPDATE steward_slot s
    SET task_id = claimed.id, epoch = claimed.epoch, taken_at = now()
    FROM claimed
    WHERE s.id = (SELECT id FROM slot)
), attempt AS (
    -- `credential`: the worker credential's id, the only one the minting service gives
    -- this attempt's tokens to (runtime/sql/token_issue.sql); NULL without one.
    INSERT INTO steward_attempt (task_id, epoch, worker, credential, reason, started_at, heartbeat_at,
                                 lease_expires_at, end_reason)
    SELECT claimed.id, claimed.epoch, %(worker)s, %(credential)s, claimed.next_reason, now(), now(),
           now() + make_interval(secs => %(lease)s::float8), ''
    FROM claimed
    RETURNING id
), audited AS (
    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    SELECT 'worker:' || %(worker)s, claimed.tenant, claimed.id,
           'attempt.started',
           -- The worker is the row's actor: not repeated here (issue 5, item 10).
           jsonb_build_object('epoch', claimed.epoch, 'reason', claimed.next_reason)
    FROM claimed
)
SELECT claimed.id, claimed.epoch, claimed.next_reason, claimed.agent, claimed.agent_version, claimed.input,
       claimed.tenant, claimed.owner, claimed.parent_id, claimed.root_id, claimed.pool,
       (SELECT id FROM attempt) AS attempt_id,
       -- How long it waited in the queue, for the fleet's metrics (runtime/meter.py). A
       -- recovered task kept its old queued_at (recover_expired.sql): its wait began when
       -- the lapsed attempt was ended, one primary-key probe and only on recovery.
       extract(epoch FROM now() - CASE WHEN claimed.next_reason = 'recovery'
           THEN coalesce((SELECT a.ended_at FROM steward_attempt a
                          WHERE a.task_id = claimed.id AND a.epoch = claimed.epoch - 1),
                         claimed.queued_at)
           ELSE claimed.queued_at END)::float8 AS waited
FROM claimed
