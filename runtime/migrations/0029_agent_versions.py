"""Agent versions (issue 23, docs/adr/0037-agent-versions.md): a task records the version
of its agent's code it was submitted under (steward_task.agent_version, "" for the tasks
submitted before), a worker's process row says which versions it serves
(steward_process.versions), steward_retired_version lists the versions operators retired,
and steward_submit() takes the version as its last argument and refuses a retired one.
The claim (runtime/sql/claim.sql) reads both. Frozen: the SQL below is carried as it ran;
the columns are Django's (`sqlmigrate` prints them):

    ALTER TABLE "steward_task" ADD COLUMN "agent_version" varchar(64) DEFAULT '' NOT NULL;
    ALTER TABLE "steward_process" ADD COLUMN "versions" jsonb DEFAULT '{}'::jsonb NOT NULL;

Both columns carry a database default, so adding them rewrites no row, and a process or
a submit still running the old code while the migration runs writes "" and {}.
"""

import django.db.models.functions.datetime
from django.db import migrations, models

OLD_SIGNATURE = "steward_submit(uuid, text, jsonb, text, text, text, text, text, text, jsonb, uuid, uuid, integer)"
NEW_SIGNATURE = (
    "steward_submit(uuid, text, jsonb, text, text, text, text, text, text, jsonb, uuid, uuid, integer, text)"
)

NEW_BODY = r"""
CREATE OR REPLACE FUNCTION public.steward_submit(p_id uuid, p_agent text, p_input jsonb, p_digest text, p_tenant text, p_owner text, p_pool text, p_key text, p_actor text, p_audit jsonb, p_parent uuid, p_root uuid, p_spawn_seq integer, p_version text, OUT outcome text, OUT task_id uuid, OUT status text, OUT admitted bigint, OUT max_running integer, OUT max_queued integer, OUT wake boolean)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_id uuid := coalesce(p_id, steward_uuid7(now()));
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

    -- Retire against submit (runtime/versions/services.py): a retire takes this lock
    -- exclusively and then looks for unfinished tasks of the version; a submit takes it
    -- shared and then looks for the retirement. Each statement reads a fresh snapshot, so
    -- whichever comes second sees what the first committed: never a task on a retired version.
    IF p_version <> '' THEN
        PERFORM pg_advisory_xact_lock_shared(hashtextextended('steward_version:' || p_agent || ':' || p_version, 0));
        IF EXISTS (SELECT 1 FROM steward_retired_version r WHERE r.agent = p_agent AND r.version = p_version) THEN
            outcome := 'retired';
            RETURN;
        END IF;
    END IF;

    -- A handful of rows (one per backend that changed the pool's tasks since the last
    -- fold), whatever the backlog (migration 0004).
    SELECT coalesce(sum(c.admitted), 0) INTO admitted FROM steward_pool_count c WHERE c.pool = p_pool;
    IF admitted >= max_running + max_queued THEN
        outcome := 'queue_full';
        RETURN;
    END IF;

    INSERT INTO steward_task (id, agent, agent_version, input, input_digest, tenant, owner, pool, status,
                              epoch, next_reason, parent_id, root_id, spawn_seq, idempotency_key,
                              crash_count, status_note, created_at, updated_at, queued_at)
    VALUES (v_id, p_agent, coalesce(p_version, ''), p_input, p_digest, p_tenant, p_owner, p_pool, 'queued',
            0, 'first', p_parent, coalesce(p_root, v_id), p_spawn_seq, p_key, 0, '', now(), now(), now())
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        -- The same caller key committed through another pool while we waited: theirs stands.
        SELECT t.id, t.status, CASE WHEN t.input_digest = p_digest THEN 'existing' ELSE 'conflict' END
        INTO task_id, status, outcome
        FROM steward_task t WHERE t.tenant = p_tenant AND t.idempotency_key = p_key;
        RETURN;
    END IF;

    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    VALUES (p_actor, p_tenant, v_id, 'task.submitted', p_audit);
    outcome := 'created';
    task_id := v_id;
    status := 'queued';
    wake := admitted < max_running;
END
$function$;
"""

OLD_BODY = r"""
CREATE OR REPLACE FUNCTION public.steward_submit(p_id uuid, p_agent text, p_input jsonb, p_digest text, p_tenant text, p_owner text, p_pool text, p_key text, p_actor text, p_audit jsonb, p_parent uuid, p_root uuid, p_spawn_seq integer, OUT outcome text, OUT task_id uuid, OUT status text, OUT admitted bigint, OUT max_running integer, OUT max_queued integer, OUT wake boolean)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_id uuid := coalesce(p_id, steward_uuid7(now()));
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
    -- fold), whatever the backlog (migration 0004).
    SELECT coalesce(sum(c.admitted), 0) INTO admitted FROM steward_pool_count c WHERE c.pool = p_pool;
    IF admitted >= max_running + max_queued THEN
        outcome := 'queue_full';
        RETURN;
    END IF;

    INSERT INTO steward_task (id, agent, input, input_digest, tenant, owner, pool, status, epoch,
                              next_reason, parent_id, root_id, spawn_seq, idempotency_key,
                              crash_count, status_note, created_at, updated_at, queued_at)
    VALUES (v_id, p_agent, p_input, p_digest, p_tenant, p_owner, p_pool, 'queued', 0, 'first',
            p_parent, coalesce(p_root, v_id), p_spawn_seq, p_key, 0, '', now(), now(), now())
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        -- The same caller key committed through another pool while we waited: theirs stands.
        SELECT t.id, t.status, CASE WHEN t.input_digest = p_digest THEN 'existing' ELSE 'conflict' END
        INTO task_id, status, outcome
        FROM steward_task t WHERE t.tenant = p_tenant AND t.idempotency_key = p_key;
        RETURN;
    END IF;

    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    VALUES (p_actor, p_tenant, v_id, 'task.submitted', p_audit);
    outcome := 'created';
    task_id := v_id;
    status := 'queued';
    wake := admitted < max_running;
END
$function$;
"""

# As 0027_worker_role left the old signature: run as the schema's owner, its search_path
# pinned, callable only by the roles `migrate` grants it to (runtime/roles.py).
PINNED = """
ALTER FUNCTION {0} SECURITY DEFINER SET search_path = public, steward_test_clock, pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION {0} FROM PUBLIC;
"""

SUBMIT = f"DROP FUNCTION IF EXISTS {OLD_SIGNATURE};\n{NEW_BODY}\n{PINNED.format(NEW_SIGNATURE)}"
SUBMIT_REVERSE = f"DROP FUNCTION IF EXISTS {NEW_SIGNATURE};\n{OLD_BODY}\n{PINNED.format(OLD_SIGNATURE)}"


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0027_worker_role"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="agent_version",
            field=models.CharField(blank=True, db_default="", default="", max_length=64),
        ),
        migrations.AddField(
            model_name="process",
            name="versions",
            field=models.JSONField(db_default={}, default=dict),
        ),
        migrations.CreateModel(
            name="RetiredVersion",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("agent", models.CharField(max_length=200)),
                ("version", models.CharField(max_length=64)),
                ("actor", models.CharField(max_length=200)),
                ("retired_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                "db_table": "steward_retired_version",
                "constraints": [models.UniqueConstraint(fields=("agent", "version"), name="retired_version_once")],
            },
        ),
        migrations.RunSQL(SUBMIT, reverse_sql=SUBMIT_REVERSE),
    ]
