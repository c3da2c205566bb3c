"""List pages from indexes (issue 5, item 9): time-ordered task ids, and the indexes the
keyset pages walk (runtime/tasks/selectors.py), in place of ones no query used as well.

The SQL is inline, as it ran.

Tasks created before this migration keep their random (version 4) ids; in id order
they sort among themselves arbitrarily, and most sort before (newer than) every
time-ordered one. Nothing else depends on the order of ids.
"""

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

import runtime.ids

# A version-7 UUID (RFC 9562) for the instant `at`: its 48 first bits are the
# milliseconds since the epoch, rounded down, and the rest are gen_random_uuid()'s random
# bits (whose variant bits are already right) with the version nibble set to 7.
UUID7 = """
CREATE FUNCTION steward_uuid7(at timestamptz) RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 'hex')::uuid
    FROM (SELECT overlay(uuid_send(gen_random_uuid())
                         PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
                         FROM 1 FOR 6) AS b) AS random
$$;
"""

# steward_submit() as in 0004, but minting the task's id when the caller passes none:
# from now(), the instant that is also the task's created_at, so a created-at range is
# exactly an id range (runtime/tasks/selectors.py). A caller that passes an id keeps it.
SUBMIT_FUNCTION = """
CREATE OR REPLACE FUNCTION steward_submit(
    p_id uuid, p_agent text, p_input jsonb, p_digest text, p_tenant text, p_owner text,
    p_pool text, p_key text, p_actor text, p_audit jsonb,
    p_parent uuid, p_root uuid, p_spawn_seq integer,
    OUT outcome text, OUT task_id uuid, OUT status text, OUT admitted bigint,
    OUT max_running integer, OUT max_queued integer, OUT wake boolean
) LANGUAGE plpgsql AS $$
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

    INSERT INTO steward_audit (chain, actor, tenant, task_id, kind, data)
    VALUES ('task:' || v_id, p_actor, p_tenant, v_id, 'task.submitted', p_audit);
    outcome := 'created';
    task_id := v_id;
    status := 'queued';
    wake := admitted < max_running;
END
$$;
"""

# Django adds a varchar_pattern_ops index beside the unique index of a CharField that is
# unique or a primary key, for LIKE 'prefix%'. Nothing matches effect keys or pool names
# by prefix; each was a second index to write for nothing. (Django drops these with
# IF EXISTS when it alters such a field, so their absence is safe for later migrations.)
DROP_PATTERN_INDEXES = """
DO $$
DECLARE
    idx text;
BEGIN
    FOR idx IN SELECT indexname FROM pg_indexes
               WHERE tablename IN ('steward_effect', 'steward_pool') AND indexname LIKE '%\\_like'
                 AND indexdef LIKE '%varchar_pattern_ops%'
    LOOP
        EXECUTE format('DROP INDEX %I', idx);
    END LOOP;
END
$$;
"""

RESTORE_PATTERN_INDEXES = """
CREATE INDEX steward_effect_key_19e55c14_like ON steward_effect (key varchar_pattern_ops);
CREATE INDEX steward_pool_name_c532e4ea_like ON steward_pool (name varchar_pattern_ops);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0004_pool_counts"),
    ]

    operations = [
        migrations.RunSQL(UUID7, reverse_sql="DROP FUNCTION steward_uuid7(timestamptz);"),
        migrations.RunSQL(
            SUBMIT_FUNCTION, reverse_sql=import_module("runtime.migrations.0004_pool_counts").SUBMIT_FUNCTION
        ),
        migrations.RunSQL(DROP_PATTERN_INDEXES, reverse_sql=RESTORE_PATTERN_INDEXES),
        migrations.RemoveIndex(
            model_name="auditevent",
            name="audit_by_tenant",
        ),
        migrations.RemoveIndex(
            model_name="effect",
            name="effect_state_created",
        ),
        migrations.RemoveIndex(
            model_name="task",
            name="task_status_created",
        ),
        migrations.RemoveIndex(
            model_name="task",
            name="task_tenant_created",
        ),
        migrations.AlterField(
            model_name="effect",
            name="attempt",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="effects",
                to="runtime.attempt",
            ),
        ),
        migrations.AlterField(
            model_name="task",
            name="id",
            field=models.UUIDField(default=runtime.ids.uuid7, editable=False, primary_key=True, serialize=False),
        ),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["tenant", "at", "id"], name="audit_tenant_at"),
        ),
        migrations.AddIndex(
            model_name="effect",
            index=models.Index(fields=["state", "id"], name="effect_state_id"),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(fields=["tenant", "id"], name="task_tenant_id"),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(fields=["tenant", "status", "id"], name="task_tenant_status_id"),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(fields=["status", "id"], name="task_status_id"),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(condition=models.Q(("parent__isnull", False)), fields=["root", "id"], name="task_tree"),
        ),
    ]
