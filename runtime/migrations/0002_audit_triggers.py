from django.db import migrations

from runtime.db import sql


class Migration(migrations.Migration):
    dependencies = [("runtime", "0001_initial")]

    operations = [
        migrations.RunSQL(sql("audit_schema"), reverse_sql=sql("audit_schema_reverse")),
    ]
