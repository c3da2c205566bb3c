"""The fleet's minute rows are kept per tenant as well, so that the dashboard shows each
tenant's members their own tenant's last hour and the fleet's totals only to the fleet's
managers (issue 20, point 11). Each beat writes this minute's row of the whole fleet
(tenant "", what the process did for everyone, as before) and a row per tenant whose
tasks it ran. Rows written before this migration carry the empty tenant: they are the
fleet's rows they always were.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0023_seed_grants_stop_clock_bounded_seals"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="processminute", name="process_minute_once"),
        migrations.AddField(
            model_name="processminute",
            name="tenant",
            field=models.CharField(default="", max_length=100),
        ),
        migrations.AddConstraint(
            model_name="processminute",
            constraint=models.UniqueConstraint(fields=("minute", "process", "tenant"), name="process_minute_once"),
        ),
        migrations.AddIndex(
            model_name="processminute",
            index=models.Index(fields=["tenant", "minute"], name="process_minute_tenant"),
        ),
    ]
