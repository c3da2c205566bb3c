-- Create a task and its `task.submitted` audit row together. ON CONFLICT covers the
-- caller key (tenant, idempotency_key) and a child's (parent, spawn_seq): the caller
-- learns it lost from an empty result and reads the winner.
WITH created AS (
    INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status,
                              epoch, next_reason, parent_id, root_id, spawn_seq,
                              idempotency_key, crash_count, status_note, created_at,
                              updated_at, queued_at)
    VALUES (%(id)s, %(agent)s, %(input)s::jsonb, %(digest)s, %(tenant)s, %(owner)s, %(pool)s,
            'queued', 0, 'first', %(parent)s::uuid, coalesce(%(root)s::uuid, %(id)s::uuid),
            %(spawn_seq)s::integer, %(key)s, 0, '', now(), now(), now())
    ON CONFLICT DO NOTHING
    RETURNING id, tenant
), audited AS (
    INSERT INTO steward_audit (chain, actor, tenant, task_id, kind, data)
    SELECT 'task:' || created.id, %(actor)s, created.tenant, created.id, 'task.submitted',
           %(data)s::jsonb
    FROM created
)
SELECT id FROM created
