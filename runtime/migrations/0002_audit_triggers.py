"""The audit trail's hash, link and append-only triggers, as first created.

Frozen: this is the SQL this migration ran, carried in the file, so that editing the
runtime never changes what an old migration does. Later definitions are later
migrations (0006 stores hashes as bytes, 0008 derives each row's chain).
"""

from django.db import migrations

FORWARD = r"""
-- The audit trail's guarantees live in PostgreSQL, not in application code:
--  1. steward_audit_hash() is the one definition of a row's hash. It covers every
--     column, the previous row's hash in the same chain, and the time as integer
--     microseconds since the epoch (so the session TimeZone cannot change it).
--     jsonb's text form is canonical (sorted keys, fixed spacing), so data hashes
--     the same way on every server.
--  2. A BEFORE INSERT trigger links each row to the tail of its chain. The advisory lock
--     serialises inserts into one chain; different chains (tasks) never wait for each
--     other. Application code cannot choose chain_seq, prev_hash, hash or at.
--  3. A BEFORE UPDATE OR DELETE trigger refuses every change to an existing row.
CREATE OR REPLACE FUNCTION steward_audit_hash(
    prev_hash text, chain text, chain_seq integer, at timestamptz, actor text,
    tenant text, task_id uuid, kind text, data jsonb
) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT encode(sha256(convert_to(concat_ws(E'\x1f',
        prev_hash, chain, chain_seq::text,
        (extract(epoch FROM at) * 1000000)::bigint::text,
        actor, tenant, coalesce(task_id::text, ''), kind, data::text), 'UTF8')), 'hex')
$$;

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
    NEW.prev_hash := coalesce(tail.hash, '');
    NEW.hash := steward_audit_hash(NEW.prev_hash, NEW.chain, NEW.chain_seq, NEW.at,
                                   NEW.actor, NEW.tenant, NEW.task_id, NEW.kind, NEW.data);
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION steward_audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'steward_audit is append-only: % refused on row %', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER steward_audit_link BEFORE INSERT ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_link();
CREATE TRIGGER steward_audit_append_only BEFORE UPDATE OR DELETE ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_refuse_change();
"""

REVERSE = r"""
DROP TRIGGER IF EXISTS steward_audit_append_only ON steward_audit;
DROP TRIGGER IF EXISTS steward_audit_link ON steward_audit;
DROP FUNCTION IF EXISTS steward_audit_refuse_change();
DROP FUNCTION IF EXISTS steward_audit_link();
DROP FUNCTION IF EXISTS steward_audit_hash(text, text, integer, timestamptz, text, text, uuid, text, jsonb);
"""


class Migration(migrations.Migration):
    dependencies = [("runtime", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
