"""Audit hashes as 32 raw bytes instead of 64 hex characters (issue 5, item 10).

A row's hash is unchanged: the hash input still carries the previous hash as hex, so
every row written before this migration verifies as it did (the columns are converted
with decode(..., 'hex'), byte for byte). Each row is 64 bytes smaller, its index entries
unchanged. The append-only trigger is untouched: ALTER TABLE rewrites the table without
firing row triggers, and nothing else here updates a row.

The SQL is inline, as it ran.
"""

from django.db import migrations, models

TO_BYTEA = r"""
ALTER TABLE steward_audit
    ALTER COLUMN prev_hash DROP DEFAULT,
    ALTER COLUMN hash DROP DEFAULT,
    ALTER COLUMN prev_hash TYPE bytea USING decode(prev_hash, 'hex'),
    ALTER COLUMN hash TYPE bytea USING decode(hash, 'hex'),
    ALTER COLUMN prev_hash SET DEFAULT ''::bytea,
    ALTER COLUMN hash SET DEFAULT ''::bytea;

DROP TRIGGER steward_audit_link ON steward_audit;
DROP FUNCTION steward_audit_link();
DROP FUNCTION steward_audit_hash(text, text, integer, timestamptz, text, text, uuid, text, jsonb);

-- The one definition of a row's hash (ADR 0004): every column, the previous row's hash
-- in the same chain (as hex, as the hash input always had it), and the time as integer
-- microseconds since the epoch (so the session TimeZone cannot change it). jsonb's text
-- form is canonical, so data hashes the same way on every server.
CREATE FUNCTION steward_audit_hash(
    prev_hash bytea, chain text, chain_seq integer, at timestamptz, actor text,
    tenant text, task_id uuid, kind text, data jsonb
) RETURNS bytea LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT sha256(convert_to(concat_ws(E'\x1f',
        encode(prev_hash, 'hex'), chain, chain_seq::text,
        (extract(epoch FROM at) * 1000000)::bigint::text,
        actor, tenant, coalesce(task_id::text, ''), kind, data::text), 'UTF8'))
$$;

-- As in 0002: the advisory lock serialises inserts into one chain; different chains
-- (tasks) never wait for each other. Application code cannot choose chain_seq,
-- prev_hash, hash or at.
CREATE FUNCTION steward_audit_link() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER steward_audit_link BEFORE INSERT ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_link();
"""

TO_HEX = r"""
DROP TRIGGER steward_audit_link ON steward_audit;
DROP FUNCTION steward_audit_link();
DROP FUNCTION steward_audit_hash(bytea, text, integer, timestamptz, text, text, uuid, text, jsonb);

ALTER TABLE steward_audit
    ALTER COLUMN prev_hash DROP DEFAULT,
    ALTER COLUMN hash DROP DEFAULT,
    ALTER COLUMN prev_hash TYPE varchar(64) USING encode(prev_hash, 'hex'),
    ALTER COLUMN hash TYPE varchar(64) USING encode(hash, 'hex'),
    ALTER COLUMN prev_hash SET DEFAULT '',
    ALTER COLUMN hash SET DEFAULT '';

CREATE FUNCTION steward_audit_hash(
    prev_hash text, chain text, chain_seq integer, at timestamptz, actor text,
    tenant text, task_id uuid, kind text, data jsonb
) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT encode(sha256(convert_to(concat_ws(E'\x1f',
        prev_hash, chain, chain_seq::text,
        (extract(epoch FROM at) * 1000000)::bigint::text,
        actor, tenant, coalesce(task_id::text, ''), kind, data::text), 'UTF8')), 'hex')
$$;

CREATE FUNCTION steward_audit_link() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tail record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.chain, 0));
    SELECT a.chain_seq, a.hash INTO tail
    FROM steward_audit a WHERE a.chain = NEW.chain
    ORDER BY a.chain_seq DESC LIMIT 1;
    NEW.at := now();
    NEW.chain_seq := coalesce(tail.chain_seq, 0) + 1;
    NEW.prev_hash := coalesce(tail.hash, '');
    NEW.hash := steward_audit_hash(NEW.prev_hash, NEW.chain, NEW.chain_seq, NEW.at,
                                   NEW.actor, NEW.tenant, NEW.task_id, NEW.kind, NEW.data);
    RETURN NEW;
END
$$;

CREATE TRIGGER steward_audit_link BEFORE INSERT ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_link();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0005_list_pages"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(TO_BYTEA, reverse_sql=TO_HEX)],
            state_operations=[
                migrations.AlterField(
                    model_name="auditevent",
                    name="prev_hash",
                    field=models.BinaryField(db_default=b""),
                ),
                migrations.AlterField(
                    model_name="auditevent",
                    name="hash",
                    field=models.BinaryField(db_default=b""),
                ),
            ],
        ),
    ]
