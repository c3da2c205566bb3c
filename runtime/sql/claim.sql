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
-- parallel arrays and %(currents)s whether each is its agent's current version
-- (runtime/agents.py served()); "" is a task submitted before versions, which any worker
-- may run. A task that has not started yet has no version (NULL): any worker that serves
-- its agent may claim it, and this claim fixes it, in the same UPDATE, to that worker's
-- current version, so a deploy reaches the tasks it starts even when their submitter still
-- runs the old code. steward_version_open() refuses a retired version with a fresh snapshot
-- after a shared lock that a retire takes exclusively (runtime/versions/services.py): a
-- retire racing this claim sees the task it fixed, or this claim sees the retirement.
-- A task no live worker serves stays queued ("waiting for version"): it is passed over
-- here, not failed. The filter is applied as the claim order's index is walked, so such
-- tasks at the head of a queue cost a row each.
WITH served AS (
    SELECT a.agent, a.version, a.is_current
    FROM unnest(%(agents)s::text[], %(versions)s::text[], %(currents)s::boolean[]) AS a(agent, version, is_current)
), next AS (
    SELECT t.id, t.agent_version IS NULL AS first_claim,
           (SELECT s.version FROM served s WHERE s.agent = t.agent AND s.is_current) AS current_version
    FROM steward_task t
    WHERE t.pool = %(pool)s AND t.status = 'queued'
      AND CASE WHEN t.agent_version IS NULL
               THEN steward_version_open(t.agent, (SELECT s.version FROM served s WHERE s.agent = t.agent AND s.is_current))
               ELSE t.agent_version = ''
                    OR EXISTS (SELECT 1 FROM served s WHERE s.agent = t.agent AND s.version = t.agent_version)
          END
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
        started_at = coalesce(t.started_at, now()), status_note = '',
        -- Fixed by the first claim; `next` holds the row locked, so it is still NULL here.
        agent_version = CASE WHEN (SELECT first_claim FROM next) THEN (SELECT current_version FROM next)
                             ELSE t.agent_version END
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
           -- The version a first claim fixed, as evidence of what the task started on.
           || CASE WHEN (SELECT first_claim FROM next) THEN jsonb_build_object('version', claimed.agent_version)
                   ELSE '{}'::jsonb END
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
