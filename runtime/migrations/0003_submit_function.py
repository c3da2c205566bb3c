from django.db import migrations

from runtime.db import sql


class Migration(migrations.Migration):
    dependencies = [("runtime", "0002_audit_triggers")]

    operations = [
        migrations.RunSQL(
            sql("submit_function"),
            reverse_sql="DROP FUNCTION IF EXISTS steward_submit(uuid, text, jsonb, text, text, text, text, text, "
            "text, jsonb, uuid, uuid, integer);",
        ),
    ]
