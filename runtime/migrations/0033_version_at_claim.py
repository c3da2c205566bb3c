"""A task's agent version is fixed when it starts, not when it is submitted (issue 23,
docs/adr/0037-agent-versions.md): steward_task.agent_version may be NULL, "not started
yet", and the first claim (runtime/sql/claim.sql) sets it to the current version of the
worker that claims it. steward_submit() stores the version it is given as it is (NULL
now, where it stored ''), and steward_version_open() is the claim's check that the
version it fixes is not retired, against a concurrent retire. Frozen: the SQL below is
carried as it ran; the column change is Django's (`sqlmigrate` prints it):

    ALTER TABLE "steward_task" ALTER COLUMN "agent_version" DROP NOT NULL;

Dropping NOT NULL rewrites no row. The database default stays '': a submit still running
the old code while the migration runs passes its version explicitly, as before.
"""

from django.db import migrations, models

SIGNATURE = "steward_submit(uuid, text, jsonb, text, text, text, text, text, text, jsonb, uuid, uuid, integer, text)"
OPEN_SIGNATURE = "steward_version_open(text, text)"

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
    -- A NULL version (the usual: the task's first claim fixes it, runtime/sql/claim.sql)
    -- has nothing to check here; steward_version_open() checks it at that claim.
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
    VALUES (v_id, p_agent, p_version, p_input, p_digest, p_tenant, p_owner, p_pool, 'queued',
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

# A function of its own, not a clause of the claim: in READ COMMITTED each statement of a
# VOLATILE function reads a fresh snapshot, so the retirement check below runs after the
# shared lock is granted and sees a retire that committed while the claim waited for it.
# The claim statement's own snapshot was taken before, and would not.
OPEN_BODY = r"""
CREATE OR REPLACE FUNCTION public.steward_version_open(p_agent text, p_version text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- NULL: the claiming worker does not serve this agent at all.
    IF p_version IS NULL THEN
        RETURN false;
    END IF;
    -- The key of runtime/sql/version_lock.sql, which a retire takes exclusively.
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('steward_version:' || p_agent || ':' || p_version, 0));
    RETURN NOT EXISTS (SELECT 1 FROM steward_retired_version r WHERE r.agent = p_agent AND r.version = p_version);
END
$function$;
"""

# As 0027_worker_role left the others: run as the schema's owner, its search_path pinned,
# callable only by the roles `migrate` grants it to (runtime/roles.py).
PINNED = """
ALTER FUNCTION {0} SECURITY DEFINER SET search_path = public, steward_test_clock, pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION {0} FROM PUBLIC;
"""

FORWARD = f"{NEW_BODY}\n{PINNED.format(SIGNATURE)}\n{OPEN_BODY}\n{PINNED.format(OPEN_SIGNATURE)}"
REVERSE = f"DROP FUNCTION IF EXISTS {OPEN_SIGNATURE};\n{OLD_BODY}\n{PINNED.format(SIGNATURE)}"


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0032_partitions"),
    ]

    operations = [
        migrations.AlterField(
            model_name="task",
            name="agent_version",
            field=models.CharField(blank=True, db_default="", default="", max_length=64, null=True),
        ),
        migrations.RunSQL(FORWARD, reverse_sql=REVERSE),
    ]
