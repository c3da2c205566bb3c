"""Audit seals (runtime/trail/seals.py): a table of a tenant's seals, append-only like the
trail itself. Frozen: the SQL is carried here, as it ran.
"""

import django.db.models.functions.datetime
from django.db import migrations, models

APPEND_ONLY = r"""
CREATE FUNCTION steward_audit_seal_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'steward_audit_seal is append-only: % refused on seal %', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER steward_audit_seal_append_only BEFORE UPDATE OR DELETE ON steward_audit_seal
    FOR EACH ROW EXECUTE FUNCTION steward_audit_seal_refuse_change();
"""

APPEND_ONLY_REVERSE = r"""
DROP TRIGGER steward_audit_seal_append_only ON steward_audit_seal;
DROP FUNCTION steward_audit_seal_refuse_change();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0007_database_clock_and_audit_chains"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditSeal",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant", models.CharField(max_length=100)),
                ("seq", models.IntegerField()),
                ("sealed_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("heads", models.JSONField()),
                ("key_id", models.CharField(max_length=16)),
                ("prev_mac", models.BinaryField()),
                ("mac", models.BinaryField()),
            ],
            options={
                "db_table": "steward_audit_seal",
                "constraints": [models.UniqueConstraint(fields=("tenant", "seq"), name="audit_seal_one_per_seq")],
            },
        ),
        migrations.RunSQL(APPEND_ONLY, reverse_sql=APPEND_ONLY_REVERSE),
    ]
