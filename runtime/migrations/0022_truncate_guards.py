"""The tables whose rows are never deleted refuse TRUNCATE too, and their guards fire even
under session_replication_role = replica (docs/adr/0022-database-roles.md).

Six tables refuse every DELETE from a row trigger: the audit trail and its seals, the
authorization decisions, the stops' acknowledgments, the gateway's calls and the grants.
A row trigger never sees a TRUNCATE, so each gets a statement trigger BEFORE TRUNCATE
that refuses it, whoever asks: the owner, a superuser, or a TRUNCATE of another table
that cascades here. And each of those triggers, the row guards included, is ENABLE
ALWAYS: an ordinary trigger is skipped by a session in replica mode, which a superuser
(and, on managed servers, their admin role) may set; an ALWAYS trigger is not. Only
ALTER TABLE ... DISABLE TRIGGER, which needs the table's owner, still passes them, and
the seals (migration 0008) name what that does.

Frozen: the SQL is carried here, as it ran.
"""

from django.db import migrations

# (table, the row trigger that refuses its deletes)
GUARDED = [
    ("steward_audit", "steward_audit_append_only"),
    ("steward_audit_seal", "steward_audit_seal_append_only"),
    ("steward_decision", "steward_decision_append_only"),
    ("steward_stop_ack", "steward_stop_ack_guard"),
    ("steward_gateway_call", "steward_gateway_call_ends_once"),
    ("steward_grant", "steward_grant_only_shrinks"),
]

FUNCTION = """
CREATE FUNCTION steward_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'refused at storage: % keeps every row; TRUNCATE is never allowed', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $$;
"""

GUARDS = "".join(
    f"""
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_no_truncate;
ALTER TABLE {table} ENABLE ALWAYS TRIGGER {row_guard};
"""
    for table, row_guard in GUARDED
)

REVERSE = (
    "".join(
        f"""
ALTER TABLE {table} ENABLE TRIGGER {row_guard};
DROP TRIGGER {table}_no_truncate ON {table};
"""
        for table, row_guard in GUARDED
    )
    + "DROP FUNCTION steward_refuse_truncate();\n"
)


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0021_tree_pause"),
    ]

    operations = [migrations.RunSQL(FUNCTION + GUARDS, reverse_sql=REVERSE)]
