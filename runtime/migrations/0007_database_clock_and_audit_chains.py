"""Two facts get one definition each (issue 6).

* Every stored time is the database's clock: created_at and updated_at default to
  now() in the database instead of Django's clock in the worker (the fields' state).
* The chain an audit row belongs to is steward_audit_chain(task_id, tenant), called by
  the link trigger, which now sets the chain itself: no statement spells 'task:' || id
  any more, and an INSERT names only what happened (actor, tenant, task, kind, data).
  steward_submit() is 0005's with its audit insert written that way.

Frozen: the SQL is carried here, as it ran.
"""

import django.db.models.functions.datetime
from django.db import migrations, models

CHAINS = r"""
-- The one definition of an audit row's chain: a task's own ("task:<id>"), or its
-- tenant's for events about no task. IMMUTABLE, so a reader's
-- `chain = steward_audit_chain(<id>, <tenant>)` is folded to a constant and served by
-- audit_chain_seq.
CREATE FUNCTION steward_audit_chain(task_id uuid, tenant text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN task_id IS NOT NULL THEN 'task:' || task_id ELSE 'tenant:' || tenant END
$$;

-- 0006's link trigger, setting the chain as well: application code chooses none of
-- chain, chain_seq, prev_hash, hash or at.
CREATE OR REPLACE FUNCTION steward_audit_link() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tail record;
BEGIN
    NEW.chain := steward_audit_chain(NEW.task_id, NEW.tenant);
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.chain, 0));
    SELECT a.chain_seq, a.hash INTO tail
    FROM steward_audit a WHERE a.chain = NEW.chain
    ORDER BY a.chain_seq DESC LIMIT 1;
    NEW.at := now();
    NEW.chain_seq := coalesce(tail.chain_seq, 0) + 1;
    NEW.prev_hash := coalesce(tail.hash, ''::bytea);
    NEW.hash := steward_audit_hash(NEW.prev_hash, NEW.chain, NEW.chain_seq, NEW.at,
                                   NEW.actor, NEW.tenant, NEW.task_id, NEW.kind, NEW.data);
    RETURN NEW;
END
$$;

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

    INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
    VALUES (p_actor, p_tenant, v_id, 'task.submitted', p_audit);
    outcome := 'created';
    task_id := v_id;
    status := 'queued';
    wake := admitted < max_running;
END
$$;
"""

# Back to 0006's trigger and 0005's function (the chain helper last: they no longer use it).
CHAINS_REVERSE = r"""
CREATE OR REPLACE FUNCTION steward_audit_link() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tail record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.chain, 0));
    SELECT a.chain_seq, a.hash INTO tail
    FROM steward_audit a WHERE a.chain = NEW.chain
    ORDER BY a.chain_seq DESC LIMIT 1;
    NEW.at := now();
    NEW.chain_seq := coalesce(tail.chain_seq, 0) + 1;
    NEW.prev_hash := coalesce(tail.hash, ''::bytea);
    NEW.hash := steward_audit_hash(NEW.prev_hash, NEW.chain, NEW.chain_seq, NEW.at,
                                   NEW.actor, NEW.tenant, NEW.task_id, NEW.kind, NEW.data);
    RETURN NEW;
END
$$;

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

DROP FUNCTION steward_audit_chain(uuid, text);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0006_audit_bytea_hashes"),
    ]

    operations = [
        migrations.RunSQL(CHAINS, reverse_sql=CHAINS_REVERSE),
        migrations.AlterField(
            model_name="effect",
            name="created_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.AlterField(
            model_name="pool",
            name="created_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.AlterField(
            model_name="task",
            name="created_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.AlterField(
            model_name="task",
            name="updated_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
    ]
