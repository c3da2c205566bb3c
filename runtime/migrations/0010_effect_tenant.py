"""Effects carry their task's tenant, so a tenant's ledger pages off one index. Frozen:
the backfill's SQL is carried here, as it ran."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0009_fleet"),
    ]

    operations = [
        migrations.AddField(
            model_name="effect",
            name="tenant",
            field=models.CharField(default="", max_length=100),
            preserve_default=False,
        ),
        migrations.RunSQL(
            "UPDATE steward_effect e SET tenant = t.tenant FROM steward_task t WHERE t.id = e.task_id",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddIndex(
            model_name="effect",
            index=models.Index(fields=["tenant", "id"], name="effect_tenant_id"),
        ),
        migrations.AddIndex(
            model_name="effect",
            index=models.Index(fields=["tenant", "state", "id"], name="effect_tenant_state_id"),
        ),
    ]
