"""Admission reads kept counts instead of counting the pool's tasks (issue 5, item 7).

The SQL is inline, as it ran: later migrations must not change what this one did.
docs/adr/0010-kept-admission-counts.md says why the counts are sharded by backend.
"""

import django.db.models.deletion
from django.db import migrations, models

# One row per (pool, backend). The triggers fire only when a row enters or leaves
# {queued, running}: the claim (queued -> running) and a recovery (running -> queued)
# stay inside the set, so the WHEN clauses keep them from calling the function at all.
# AFTER, not BEFORE: an INSERT that ON CONFLICT DO NOTHING skips fires no AFTER trigger.
#
# Race: a backend runs one transaction at a time, so the row (pool, pg_backend_pid()) is
# never written by two open transactions; the UPDATE takes its row lock without waiting
# (except behind the supervisor's fold, which takes rows with SKIP LOCKED and deletes
# them: the UPDATE then finds no row and the INSERT makes a new one).
COUNT_TRIGGERS = """
CREATE FUNCTION steward_pool_count_add(p_pool text, p_delta integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE steward_pool_count SET admitted = admitted + p_delta
    WHERE pool = p_pool AND shard = pg_backend_pid();
    IF NOT FOUND THEN
        INSERT INTO steward_pool_count (pool, shard, admitted) VALUES (p_pool, pg_backend_pid(), p_delta)
        ON CONFLICT (pool, shard) DO UPDATE SET admitted = steward_pool_count.admitted + EXCLUDED.admitted;
    END IF;
END
$$;

CREATE FUNCTION steward_pool_count_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    p text;
    d integer;
BEGIN
    -- The WHEN clauses let us in only if the row entered or left the set.
    IF TG_OP = 'INSERT' THEN
        p := NEW.pool; d := 1;
    ELSIF TG_OP = 'DELETE' THEN
        p := OLD.pool; d := -1;
    ELSIF OLD.pool = NEW.pool THEN
        p := NEW.pool; d := CASE WHEN NEW.status IN ('queued', 'running') THEN 1 ELSE -1 END;
    ELSE
        -- Moved between pools (nothing does this today): one change for each side.
        IF OLD.status IN ('queued', 'running') THEN
            PERFORM steward_pool_count_add(OLD.pool, -1);
        END IF;
        IF NEW.status IN ('queued', 'running') THEN
            PERFORM steward_pool_count_add(NEW.pool, 1);
        END IF;
        RETURN NULL;
    END IF;
    -- steward_pool_count_add() inlined: a nested call costs as much as the UPDATE.
    UPDATE steward_pool_count SET admitted = admitted + d WHERE pool = p AND shard = pg_backend_pid();
    IF NOT FOUND THEN
        PERFORM steward_pool_count_add(p, d);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION steward_pool_count_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM steward_pool_count;
    RETURN NULL;
END
$$;

-- Taken by CREATE TRIGGER anyway; said out loud because the backfill below relies on it:
-- no task changes status between the triggers' creation and the count.
LOCK TABLE steward_task IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER steward_pool_count_insert AFTER INSERT ON steward_task
    FOR EACH ROW WHEN (NEW.status IN ('queued', 'running'))
    EXECUTE FUNCTION steward_pool_count_change();
CREATE TRIGGER steward_pool_count_update AFTER UPDATE OF status, pool ON steward_task
    FOR EACH ROW WHEN ((OLD.status IN ('queued', 'running')) <> (NEW.status IN ('queued', 'running'))
                       OR (OLD.pool <> NEW.pool AND NEW.status IN ('queued', 'running')))
    EXECUTE FUNCTION steward_pool_count_change();
CREATE TRIGGER steward_pool_count_delete AFTER DELETE ON steward_task
    FOR EACH ROW WHEN (OLD.status IN ('queued', 'running'))
    EXECUTE FUNCTION steward_pool_count_change();
CREATE TRIGGER steward_pool_count_truncate AFTER TRUNCATE ON steward_task
    FOR EACH STATEMENT EXECUTE FUNCTION steward_pool_count_truncate();

INSERT INTO steward_pool_count (pool, shard, admitted)
SELECT pool, 0, count(*) FROM steward_task WHERE status IN ('queued', 'running') GROUP BY pool;
"""

COUNT_TRIGGERS_REVERSE = """
DROP TRIGGER steward_pool_count_truncate ON steward_task;
DROP TRIGGER steward_pool_count_delete ON steward_task;
DROP TRIGGER steward_pool_count_update ON steward_task;
DROP TRIGGER steward_pool_count_insert ON steward_task;
DROP FUNCTION steward_pool_count_truncate();
DROP FUNCTION steward_pool_count_change();
DROP FUNCTION steward_pool_count_add(text, integer);
"""

# steward_submit() as in 0003, with the count of the pool's queued and running tasks
# replaced by the sum of its kept counts. Why a function at all (0003): admission must
# read *after* taking the pool's row lock, and inside PL/pgSQL each statement takes a
# fresh snapshot (READ COMMITTED), so the sum includes every submit that committed
# while we waited for the lock. Decrements need no lock: one that has not committed
# yet leaves the sum high, so the bound errs towards QUEUE_FULL, exactly as the count
# it replaces did while the task was still queued or running.
SUBMIT_FUNCTION = """
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

    -- A handful of rows (one per backend that changed the pool's tasks since the last
    -- fold), whatever the backlog.
    SELECT coalesce(sum(c.admitted), 0) INTO admitted FROM steward_pool_count c WHERE c.pool = p_pool;
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

# 0003's definition, for reversing.
SUBMIT_FUNCTION_0003 = SUBMIT_FUNCTION.replace(
    """    -- A handful of rows (one per backend that changed the pool's tasks since the last
    -- fold), whatever the backlog.
    SELECT coalesce(sum(c.admitted), 0) INTO admitted FROM steward_pool_count c WHERE c.pool = p_pool;
""",
    """    -- Two counts, each straight off its partial index (task_claim_order, task_running_by_pool).
    SELECT (SELECT count(*) FROM steward_task t WHERE t.pool = p_pool AND t.status = 'queued')
         + (SELECT count(*) FROM steward_task t WHERE t.pool = p_pool AND t.status = 'running')
    INTO admitted;
""",
)


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0003_submit_function"),
    ]

    operations = [
        migrations.CreateModel(
            name="PoolCount",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "pool", "shard", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                (
                    "pool",
                    models.ForeignKey(
                        db_column="pool",
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="counts",
                        to="runtime.pool",
                    ),
                ),
                ("shard", models.IntegerField(help_text="The backend pid that wrote it; 0 for folded rows.")),
                (
                    "admitted",
                    models.BigIntegerField(default=0, help_text="Its share of the pool's queued + running tasks."),
                ),
            ],
            options={
                "db_table": "steward_pool_count",
            },
        ),
        migrations.RunSQL(COUNT_TRIGGERS, reverse_sql=COUNT_TRIGGERS_REVERSE),
        migrations.RunSQL(SUBMIT_FUNCTION, reverse_sql=SUBMIT_FUNCTION_0003),
        migrations.RemoveIndex(
            model_name="task",
            name="task_running_by_pool",
        ),
    ]
