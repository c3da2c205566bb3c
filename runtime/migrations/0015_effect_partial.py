"""An effect may end `partial`: the credential gateway cut its call mid-stream (a grant
revoked while the model was answering), and its receipt says what was delivered
(runtime/effects/ledger.py, states.EFFECT_TRANSITIONS `cut` and `retake`).

Numbered 0015 and depending on 0013_gateway, so that a concurrent 0014 merges beside it
(renumbered at the merge). Frozen: the SQL it runs is, as `sqlmigrate` prints it:

    ALTER TABLE "steward_effect" DROP CONSTRAINT "effect_state_known";
    ALTER TABLE "steward_effect" ADD CONSTRAINT "effect_state_known" CHECK ("state" IN
        ('intent', 'committed', 'failed', 'unknown', 'partial'));

(the choices change no SQL). The new check validates every row under the table's lock:
a scan of the ledger, once.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0014_stops"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="effect",
            name="effect_state_known",
        ),
        migrations.AlterField(
            model_name="effect",
            name="state",
            field=models.CharField(
                choices=[
                    ("intent", "intent"),
                    ("committed", "committed"),
                    ("failed", "failed"),
                    ("unknown", "unknown"),
                    ("partial", "partial"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="effect",
            constraint=models.CheckConstraint(
                condition=models.Q(("state__in", ("intent", "committed", "failed", "unknown", "partial"))),
                name="effect_state_known",
            ),
        ),
    ]
