"""Bounded growth (issue 25, docs/adr/0040-partitions.md): the four high-volume tables
become natively range-partitioned, one partition a day, so retention detaches and drops
whole partitions instead of deleting rows.

* steward_audit by `at`. Its primary key becomes (id, at) and audit_chain_seq
  (chain, chain_seq, at): a partitioned table's unique index must hold its key. A
  chain's numbering stays unique by the link trigger, which numbers a chain under its
  advisory lock. `at` defaults to steward_audit_now(), now() resolved as the link
  trigger resolves it: a row is routed to its partition by the value the trigger then
  keeps (a BEFORE trigger may not move a row to another partition).
* steward_decision by `id` (UUIDv7, time-ordered): its primary key stays (id), so the
  foreign keys from gateway calls and blocked tasks still hold, re-pointed at the parent.
* steward_gateway_call and steward_step by `task_id` (UUIDv7: the task's creation time):
  a task's calls and journal stay in one partition, every lookup by task is pruned to
  it, and (task_id, seq) and the committed-key index stay unique. The call's primary key
  becomes (id, task_id).

Today's table becomes each parent's `_legacy` partition, from MINVALUE to the start of
the day the migration runs: renamed and attached, its rows neither copied nor rewritten
(ATTACH scans it once to check the bound; indexes that match the parent's are adopted,
the rest built). Each parent gets a `_default` partition, the safety net for a row whose
day has no partition yet, and partitions for today and the next days
(steward_partitions_ensure(), which the daily job calls).

steward_partition_drop() drops a partition only when its whole range lies before the
cutoff; a task-keyed one only when every task in its range ended before the cutoff; an
audit one only once archived (steward_audit_archive), recording each chain's last row
in steward_audit_boundary first so verify starts the chain from there. A decision
partition that a kept row still references is held by its foreign key.

Frozen: the SQL below is carried as it ran (the two new tables are Django's, as
`sqlmigrate` prints them).
"""

import django.db.models.functions.datetime
from django.db import migrations, models

FUNCTIONS = r"""
-- The lowest UUIDv7 of a millisecond: partition bounds for the tables keyed by a UUIDv7.
CREATE FUNCTION steward_uuid7_floor(at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0') || repeat('0', 20))::uuid
$$;

-- The time a UUIDv7 was minted at (its first 48 bits: milliseconds since the epoch).
CREATE FUNCTION steward_uuid7_time(id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_timestamp(('x' || lpad(left(replace(id::text, '-', ''), 12), 16, '0'))::bit(64)::bigint / 1000.0)
$$;

-- An audit row's `at` before routing: now() as the link trigger will read it (plpgsql,
-- resolved in the session's search_path, the harness's clock included), so the trigger
-- never moves a row out of the partition it was routed to.
CREATE FUNCTION steward_audit_now() RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN now();
END
$$;

-- A partition of a table that refuses TRUNCATE refuses it too: a statement trigger on the
-- parent does not fire for a TRUNCATE of the partition itself (the row guards are cloned).
CREATE FUNCTION steward_partition_guard(p_partition text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate()',
                   p_partition || '_no_truncate', p_partition);
    EXECUTE format('ALTER TABLE %I ENABLE ALWAYS TRIGGER %I', p_partition, p_partition || '_no_truncate');
END
$$;

-- The link trigger's tail lookup, pruned: a chain's newest row is searched for first in the
-- partitions of the last two days, then, only if the chain has no row of the last day,
-- in every partition. Why the first search is enough when it finds a row of the last
-- day: the tail was inserted after that row, and a row's `at` is its transaction's start,
-- so the tail's `at` is at most one transaction's length (less than a day: the
-- server-side bounds of docs/adr/0012-bounded-stale-owners.md) before that row's. Without
-- it, each audit INSERT probed every partition's index: about 12 us more per partition
-- (docs/performance.md), a year of daily partitions 4 ms an event.
CREATE OR REPLACE FUNCTION steward_audit_link() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tail record;
BEGIN
    NEW.chain := steward_audit_chain(NEW.task_id, NEW.tenant);
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.chain, 0));
    NEW.at := now();
    SELECT a.chain_seq, a.hash, a.at INTO tail
    FROM steward_audit a WHERE a.chain = NEW.chain AND a.at >= NEW.at - interval '2 days'
    ORDER BY a.chain_seq DESC LIMIT 1;
    IF tail.at IS NULL OR tail.at < NEW.at - interval '1 day' THEN
        SELECT a.chain_seq, a.hash, a.at INTO tail
        FROM steward_audit a WHERE a.chain = NEW.chain
        ORDER BY a.chain_seq DESC LIMIT 1;
    END IF;
    NEW.chain_seq := coalesce(tail.chain_seq, 0) + 1;
    NEW.prev_hash := coalesce(tail.hash, ''::bytea);
    NEW.hash := steward_audit_hash(NEW.prev_hash, NEW.chain, NEW.chain_seq, NEW.at,
                                   NEW.actor, NEW.tenant, NEW.task_id, NEW.kind, NEW.data);
    RETURN NEW;
END
$$;

-- Partitions for every day from today (the database's clock) through p_through, for each
-- partitioned table; returns the partitions it created. A day whose rows already sit in
-- the default partition is skipped with a warning (its rows stay there, still read).
CREATE FUNCTION steward_partitions_ensure(p_through timestamptz) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    v_table text;
    v_day timestamptz;
    v_name text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['steward_audit', 'steward_decision', 'steward_gateway_call', 'steward_step'] LOOP
        v_day := date_trunc('day', now(), 'UTC');
        WHILE v_day <= p_through LOOP
            v_name := v_table || '_p' || to_char(v_day AT TIME ZONE 'UTC', 'YYYYMMDD');
            IF to_regclass(v_name) IS NULL THEN
                BEGIN
                    IF v_table = 'steward_audit' THEN
                        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                                       v_name, v_table, v_day, v_day + interval '1 day');
                    ELSE
                        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                                       v_name, v_table, steward_uuid7_floor(v_day),
                                       steward_uuid7_floor(v_day + interval '1 day'));
                    END IF;
                    IF v_table <> 'steward_step' THEN
                        PERFORM steward_partition_guard(v_name);
                    END IF;
                    RETURN NEXT v_name;
                EXCEPTION WHEN check_violation OR invalid_object_definition THEN
                    RAISE WARNING 'partition % not created: %', v_name, SQLERRM;
                END;
            END IF;
            v_day := v_day + interval '1 day';
        END LOOP;
    END LOOP;
END
$$;

-- Detach and drop p_table's partitions whose whole range ends at or before p_cutoff;
-- returns each partition looked at past the cutoff and what became of it: 'dropped',
-- or why it stays ('live_tasks', 'not_archived', 'referenced'). The default partition
-- is never dropped. DETACH takes the parent's ACCESS EXCLUSIVE lock for a moment.
CREATE FUNCTION steward_partition_drop(p_table text, p_cutoff timestamptz)
RETURNS TABLE (partition text, upper_at timestamptz, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    p record;
    v_lo text;
    v_hi text;
BEGIN
    IF p_table NOT IN ('steward_audit', 'steward_decision', 'steward_gateway_call', 'steward_step') THEN
        RAISE EXCEPTION 'not a partitioned table: %', p_table USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR p IN
        SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = p_table::regclass
        ORDER BY c.relname
    LOOP
        v_hi := substring(p.bound FROM $re$TO \('([^']*)'\)$re$);
        CONTINUE WHEN v_hi IS NULL;  -- the default partition
        v_lo := substring(p.bound FROM $re$FROM \('([^']*)'\)$re$);  -- NULL: MINVALUE
        partition := p.name;
        upper_at := CASE WHEN p_table = 'steward_audit' THEN v_hi::timestamptz
                         ELSE steward_uuid7_time(v_hi::uuid) END;
        CONTINUE WHEN upper_at > p_cutoff;
        IF p_table IN ('steward_gateway_call', 'steward_step') AND EXISTS (
            SELECT 1 FROM steward_task t
            WHERE t.id < v_hi::uuid AND (v_lo IS NULL OR t.id >= v_lo::uuid)
              AND (t.status NOT IN ('completed', 'failed', 'cancelled') OR t.finished_at > p_cutoff)
        ) THEN
            outcome := 'live_tasks';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_table = 'steward_audit' THEN
            IF NOT EXISTS (SELECT 1 FROM steward_audit_archive a WHERE a.partition = p.name) THEN
                outcome := 'not_archived';
                RETURN NEXT;
                CONTINUE;
            END IF;
            EXECUTE format($sql$
                INSERT INTO steward_audit_boundary (chain, tenant, chain_seq, hash, partition)
                SELECT DISTINCT ON (a.chain) a.chain, a.tenant, a.chain_seq, a.hash, %L FROM %I a
                ORDER BY a.chain, a.chain_seq DESC
                ON CONFLICT (chain) DO UPDATE SET chain_seq = excluded.chain_seq, hash = excluded.hash,
                                                  partition = excluded.partition
                WHERE steward_audit_boundary.chain_seq < excluded.chain_seq$sql$, p.name, p.name);
        END IF;
        BEGIN
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', p_table, p.name);
            EXECUTE format('DROP TABLE %I', p.name);
            outcome := 'dropped';
        EXCEPTION WHEN foreign_key_violation THEN
            outcome := 'referenced';
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

REVOKE EXECUTE ON FUNCTION steward_partition_guard(text) FROM PUBLIC;
ALTER FUNCTION steward_partitions_ensure(timestamptz)
    SECURITY DEFINER SET search_path = public, steward_test_clock, pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION steward_partitions_ensure(timestamptz) FROM PUBLIC;
ALTER FUNCTION steward_partition_drop(text, timestamptz)
    SECURITY DEFINER SET search_path = public, steward_test_clock, pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION steward_partition_drop(text, timestamptz) FROM PUBLIC;
"""

# Each table: renamed to _legacy, its triggers and its names freed, a partitioned parent
# made LIKE it, the legacy table attached below today, then the parent's own indexes
# (adopting the legacy ones that match), triggers and foreign keys.
TABLES = r"""
-- The foreign keys into steward_decision are re-pointed at its parent at the end.
ALTER TABLE steward_task DROP CONSTRAINT steward_task_blocked_decision_id_071b692d_fk_steward_d;
ALTER TABLE steward_gateway_call DROP CONSTRAINT steward_gateway_call_decision_id_32dfa439_fk_steward_d;

-- steward_audit, by at ---------------------------------------------------------------
ALTER TABLE steward_audit RENAME TO steward_audit_legacy;
DROP TRIGGER steward_audit_link ON steward_audit_legacy;
DROP TRIGGER steward_audit_peoples_kinds ON steward_audit_legacy;
DROP TRIGGER steward_audit_append_only ON steward_audit_legacy;
DROP TRIGGER steward_audit_no_truncate ON steward_audit_legacy;
CREATE SEQUENCE steward_audit_row_id AS bigint;
SELECT setval('steward_audit_row_id', coalesce((SELECT max(id) FROM steward_audit_legacy), 0) + 1, false);
ALTER TABLE steward_audit_legacy ALTER id DROP IDENTITY;
ALTER TABLE steward_audit_legacy DROP CONSTRAINT steward_audit_pkey;
ALTER TABLE steward_audit_legacy DROP CONSTRAINT audit_chain_seq;
ALTER INDEX audit_tenant_at RENAME TO audit_tenant_at_legacy;
ALTER INDEX audit_grant_events RENAME TO audit_grant_events_legacy;
CREATE TABLE steward_audit (LIKE steward_audit_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (at);
ALTER TABLE steward_audit ALTER id SET DEFAULT nextval('steward_audit_row_id');
ALTER SEQUENCE steward_audit_row_id OWNED BY steward_audit.id;
ALTER TABLE steward_audit ALTER at SET DEFAULT steward_audit_now();
ALTER TABLE steward_audit ADD CONSTRAINT steward_audit_pkey PRIMARY KEY (id, at);
ALTER TABLE steward_audit ADD CONSTRAINT audit_chain_seq UNIQUE (chain, chain_seq, at);
DO $$ BEGIN
    -- the legacy rows lie below the start of today: the daily partitions' first bound
    EXECUTE format('ALTER TABLE steward_audit ATTACH PARTITION steward_audit_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                   date_trunc('day', now(), 'UTC'));
END $$;
CREATE INDEX audit_tenant_at ON steward_audit (tenant, at, id);
CREATE INDEX audit_grant_events ON steward_audit (tenant, (data -> 'grant'), id) WHERE kind LIKE 'grant.%';
CREATE TABLE steward_audit_default PARTITION OF steward_audit DEFAULT;
SELECT steward_partition_guard('steward_audit_legacy');
SELECT steward_partition_guard('steward_audit_default');
CREATE TRIGGER steward_audit_link BEFORE INSERT ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_link();
CREATE TRIGGER steward_audit_peoples_kinds BEFORE INSERT ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_peoples_kinds();
CREATE TRIGGER steward_audit_append_only BEFORE DELETE OR UPDATE ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_refuse_change();
CREATE TRIGGER steward_audit_no_truncate BEFORE TRUNCATE ON steward_audit
    FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();
ALTER TABLE steward_audit ENABLE ALWAYS TRIGGER steward_audit_peoples_kinds;
ALTER TABLE steward_audit ENABLE ALWAYS TRIGGER steward_audit_append_only;
ALTER TABLE steward_audit ENABLE ALWAYS TRIGGER steward_audit_no_truncate;

-- steward_decision, by id ------------------------------------------------------------
ALTER TABLE steward_decision RENAME TO steward_decision_legacy;
DROP TRIGGER steward_decision_append_only ON steward_decision_legacy;
DROP TRIGGER steward_decision_no_truncate ON steward_decision_legacy;
ALTER INDEX steward_decision_pkey RENAME TO steward_decision_legacy_pkey;
ALTER INDEX decision_tenant_id RENAME TO decision_tenant_id_legacy;
ALTER INDEX decision_task_id RENAME TO decision_task_id_legacy;
CREATE TABLE steward_decision (LIKE steward_decision_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (id);
ALTER TABLE steward_decision ADD CONSTRAINT steward_decision_pkey PRIMARY KEY (id);
ALTER TABLE steward_decision ADD CONSTRAINT steward_decision_task_id_beaaf97e_fk_steward_task_id
    FOREIGN KEY (task_id) REFERENCES steward_task (id) DEFERRABLE INITIALLY DEFERRED;
DO $$ BEGIN
    -- the legacy rows lie below the start of today: the daily partitions' first bound
    EXECUTE format('ALTER TABLE steward_decision ATTACH PARTITION steward_decision_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                   steward_uuid7_floor(date_trunc('day', now(), 'UTC')));
END $$;
CREATE INDEX decision_tenant_id ON steward_decision (tenant, id);
CREATE INDEX decision_task_id ON steward_decision (task_id, id);
CREATE TABLE steward_decision_default PARTITION OF steward_decision DEFAULT;
SELECT steward_partition_guard('steward_decision_legacy');
SELECT steward_partition_guard('steward_decision_default');
CREATE TRIGGER steward_decision_append_only BEFORE DELETE OR UPDATE ON steward_decision
    FOR EACH ROW EXECUTE FUNCTION steward_decision_append_only();
CREATE TRIGGER steward_decision_no_truncate BEFORE TRUNCATE ON steward_decision
    FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();
ALTER TABLE steward_decision ENABLE ALWAYS TRIGGER steward_decision_append_only;
ALTER TABLE steward_decision ENABLE ALWAYS TRIGGER steward_decision_no_truncate;

-- steward_gateway_call, by task_id ---------------------------------------------------
ALTER TABLE steward_gateway_call RENAME TO steward_gateway_call_legacy;
DROP TRIGGER steward_gateway_call_ends_once ON steward_gateway_call_legacy;
DROP TRIGGER steward_gateway_call_no_truncate ON steward_gateway_call_legacy;
ALTER TABLE steward_gateway_call_legacy DROP CONSTRAINT steward_gateway_call_pkey;
ALTER INDEX gateway_call_admitted_key RENAME TO gateway_call_admitted_key_legacy;
ALTER INDEX gateway_call_committed_key RENAME TO gateway_call_committed_key_legacy;
ALTER INDEX gateway_call_task_id RENAME TO gateway_call_task_id_legacy;
ALTER INDEX gateway_call_tenant_id RENAME TO gateway_call_tenant_id_legacy;
CREATE TABLE steward_gateway_call (
    LIKE steward_gateway_call_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE
) PARTITION BY RANGE (task_id);
ALTER TABLE steward_gateway_call ADD CONSTRAINT steward_gateway_call_pkey PRIMARY KEY (id, task_id);
ALTER TABLE steward_gateway_call ADD CONSTRAINT steward_gateway_call_task_id_a7c35aec_fk_steward_task_id
    FOREIGN KEY (task_id) REFERENCES steward_task (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE steward_gateway_call ADD CONSTRAINT steward_gateway_call_attempt_id_cfc43ad0_fk_steward_attempt_id
    FOREIGN KEY (attempt_id) REFERENCES steward_attempt (id) DEFERRABLE INITIALLY DEFERRED;
DO $$ BEGIN
    -- the legacy rows lie below the start of today: the daily partitions' first bound
    EXECUTE format('ALTER TABLE steward_gateway_call ATTACH PARTITION steward_gateway_call_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                   steward_uuid7_floor(date_trunc('day', now(), 'UTC')));
END $$;
CREATE INDEX gateway_call_admitted_key ON steward_gateway_call (task_id, idempotency_key) WHERE outcome = 'admitted';
CREATE UNIQUE INDEX gateway_call_committed_key ON steward_gateway_call (task_id, idempotency_key)
    WHERE outcome = 'committed';
CREATE INDEX gateway_call_task_id ON steward_gateway_call (task_id, id);
CREATE INDEX gateway_call_tenant_id ON steward_gateway_call (tenant, id);
CREATE TABLE steward_gateway_call_default PARTITION OF steward_gateway_call DEFAULT;
SELECT steward_partition_guard('steward_gateway_call_legacy');
SELECT steward_partition_guard('steward_gateway_call_default');
CREATE TRIGGER steward_gateway_call_ends_once BEFORE DELETE OR UPDATE ON steward_gateway_call
    FOR EACH ROW EXECUTE FUNCTION steward_gateway_call_ends_once();
CREATE TRIGGER steward_gateway_call_no_truncate BEFORE TRUNCATE ON steward_gateway_call
    FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();
ALTER TABLE steward_gateway_call ENABLE ALWAYS TRIGGER steward_gateway_call_ends_once;
ALTER TABLE steward_gateway_call ENABLE ALWAYS TRIGGER steward_gateway_call_no_truncate;

-- steward_step, by task_id -----------------------------------------------------------
ALTER TABLE steward_step RENAME TO steward_step_legacy;
ALTER INDEX steward_step_pkey RENAME TO steward_step_legacy_pkey;
CREATE TABLE steward_step (LIKE steward_step_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)
    PARTITION BY RANGE (task_id);
ALTER TABLE steward_step ADD CONSTRAINT steward_step_pkey PRIMARY KEY (task_id, seq);
DO $$ BEGIN
    -- the legacy rows lie below the start of today: the daily partitions' first bound
    EXECUTE format('ALTER TABLE steward_step ATTACH PARTITION steward_step_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                   steward_uuid7_floor(date_trunc('day', now(), 'UTC')));
END $$;
CREATE TABLE steward_step_default PARTITION OF steward_step DEFAULT;

-- The foreign keys into steward_decision, at its parent.
ALTER TABLE steward_gateway_call ADD CONSTRAINT steward_gateway_call_decision_id_32dfa439_fk_steward_d
    FOREIGN KEY (decision_id) REFERENCES steward_decision (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE steward_task ADD CONSTRAINT steward_task_blocked_decision_id_071b692d_fk_steward_d
    FOREIGN KEY (blocked_decision_id) REFERENCES steward_decision (id) DEFERRABLE INITIALLY DEFERRED NOT VALID;
ALTER TABLE steward_task VALIDATE CONSTRAINT steward_task_blocked_decision_id_071b692d_fk_steward_d;

-- Today and the next week.
SELECT count(*) FROM steward_partitions_ensure(now() + interval '7 days');
"""


class Migration(migrations.Migration):
    # The tables' rewrite is many statements; one transaction (PostgreSQL's DDL is
    # transactional): all of it or none.
    dependencies = [
        ("runtime", "0031_lifecycle"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditArchive",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("partition", models.CharField(max_length=63, unique=True)),
                ("lower", models.DateTimeField(null=True)),
                ("upper", models.DateTimeField()),
                ("rows", models.BigIntegerField()),
                ("sha256", models.CharField(help_text="Of the archive file, as written.", max_length=64)),
                ("path", models.CharField(max_length=1000)),
                ("actor", models.CharField(max_length=200)),
                ("archived_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={"db_table": "steward_audit_archive"},
        ),
        migrations.CreateModel(
            name="AuditBoundary",
            fields=[
                ("chain", models.CharField(max_length=120, primary_key=True, serialize=False)),
                ("tenant", models.CharField(max_length=100)),
                ("chain_seq", models.IntegerField()),
                ("hash", models.BinaryField()),
                (
                    "partition",
                    models.CharField(help_text="The dropped partition that held this row.", max_length=63),
                ),
            ],
            options={"db_table": "steward_audit_boundary"},
        ),
        migrations.RunSQL(FUNCTIONS + TABLES, reverse_sql=migrations.RunSQL.noop),
    ]
