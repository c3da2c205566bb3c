"""steward_submit(), as first created. Frozen like 0002: the SQL is carried here; 0004
(kept admission counts) and 0005 (ids minted in SQL) replace the function.
"""

from django.db import migrations

FORWARD = r"""
-- steward_submit(): create a task (or find the caller key's task) in one round trip.
--
-- Why a function: admission must count the pool's tasks *after* taking the pool's row
-- lock, and a single SQL statement reads everything from one snapshot taken before it
-- waits for that lock. Inside PL/pgSQL each statement takes a fresh snapshot (READ
-- COMMITTED), so the count sees every submit that committed while we waited. Before
-- this function, the same steps were five round trips from Python.
--
-- outcome: created | existing (same key, same digest) | conflict (same key, other
-- digest) | queue_full | no_pool. `wake` says whether a worker needs a wake-up: not
-- when the pool already has at least max_running tasks queued or running, because
-- then every free slot is already spoken for and a worker that finishes claims the
-- next queued task itself (runtime/executor.py drains the pool).
CREATE OR REPLACE FUNCTION steward_submit(
    p_id uuid, p_agent text, p_input jsonb, p_digest text, p_tenant text, p_owner text,
    p_pool text, p_key text, p_actor text, p_audit jsonb,
    p_parent uuid, p_root uuid, p_spawn_seq integer,
    OUT outcome text, OUT task_id uuid, OUT status text, OUT admitted bigint,
    OUT max_running integer, OUT max_queued integer, OUT wake boolean
) LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.max_running, p.max_queued INTO max_running, max_queued
    FROM steward_pool p WHERE p.name = p_pool FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'no_pool';
        RETURN;
    END IF;

    IF p_key IS NOT NULL THEN
        SELECT t.id, t.status, CASE WHEN t.input_digest = p_digest THEN 'existing' ELSE 'conflict' END
        INTO task_id, status, outcome
        FROM steward_task t WHERE t.tenant = p_tenant AND t.idempotency_key = p_key;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;

    -- Two counts, each straight off its partial index (task_claim_order, task_running_by_pool).
    SELECT (SELECT count(*) FROM steward_task t WHERE t.pool = p_pool AND t.status = 'queued')
         + (SELECT count(*) FROM steward_task t WHERE t.pool = p_pool AND t.status = 'running')
    INTO admitted;
    IF admitted >= max_running + max_queued THEN
        outcome := 'queue_full';
        RETURN;
    END IF;

    INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch,
                              next_reason, parent_id, root_id, spawn_seq, idempotency_key,
                              crash_count, status_note, created_at, updated_at, queued_at)
    VALUES (p_id, p_agent, p_input, p_digest, p_tenant, p_owner, p_pool, 'queued', 0, 'first',
            p_parent, coalesce(p_root, p_id), p_spawn_seq, p_key, 0, '', now(), now(), now())
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        -- The same caller key committed through another pool while we waited: theirs stands.
        SELECT t.id, t.status, CASE WHEN t.input_digest = p_digest THEN 'existing' ELSE 'conflict' END
        INTO task_id, status, outcome
        FROM steward_task t WHERE t.tenant = p_tenant AND t.idempotency_key = p_key;
        RETURN;
    END IF;

    INSERT INTO steward_audit (chain, actor, tenant, task_id, kind, data)
    VALUES ('task:' || p_id, p_actor, p_tenant, p_id, 'task.submitted', p_audit);
    outcome := 'created';
    task_id := p_id;
    status := 'queued';
    wake := admitted < max_running;
END
$$;
"""

REVERSE = (
    "DROP FUNCTION IF EXISTS steward_submit(uuid, text, jsonb, text, text, text, text, text, "
    "text, jsonb, uuid, uuid, integer);"
)


class Migration(migrations.Migration):
    dependencies = [("runtime", "0002_audit_triggers")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
