"""The credential gateway admits a call that carries no Idempotency-Key (issue 22: the
official `openai` client sends none): its row keeps a null key, and such an unkeyed
call cut short ends `unknown`, not `partial`, since nothing can ask the provider again
by key. Frozen: the SQL below is carried as it ran; the column and the check are
Django's (`sqlmigrate` prints them):

    ALTER TABLE "steward_gateway_call" ALTER COLUMN "idempotency_key" DROP NOT NULL;
    ALTER TABLE "steward_gateway_call" DROP CONSTRAINT "gateway_call_outcome_known";
    ALTER TABLE "steward_gateway_call" ADD CONSTRAINT "gateway_call_outcome_known" CHECK ("outcome" IN
        ('admitted', 'committed', 'partial', 'unknown', 'failed', 'denied', 'replayed', 'busy'));

A null key is distinct from every other in gateway_call_committed_key and
gateway_call_admitted_key, so an unkeyed call is never replayed and never busy.
"""

from django.db import migrations, models

ENDS_ONCE = """
CREATE OR REPLACE FUNCTION steward_gateway_call_ends_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'steward_gateway_call rows are never deleted' USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.outcome <> 'admitted' OR NEW.outcome NOT IN ('committed', 'partial', 'unknown', 'failed')
       OR (NEW.id, NEW.tenant, NEW.task_id, NEW.epoch, NEW.jti, NEW.decision_id, NEW.idempotency_key)
          IS DISTINCT FROM (OLD.id, OLD.tenant, OLD.task_id, OLD.epoch, OLD.jti, OLD.decision_id,
                            OLD.idempotency_key) THEN
        RAISE EXCEPTION 'gateway call % ended already, or may only end (committed, partial, unknown, failed)', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""

ENDS_ONCE_REVERSE = """
CREATE OR REPLACE FUNCTION steward_gateway_call_ends_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'steward_gateway_call rows are never deleted' USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.outcome <> 'admitted' OR NEW.outcome NOT IN ('committed', 'partial', 'failed')
       OR (NEW.id, NEW.tenant, NEW.task_id, NEW.epoch, NEW.jti, NEW.decision_id, NEW.idempotency_key)
          IS DISTINCT FROM (OLD.id, OLD.tenant, OLD.task_id, OLD.epoch, OLD.jti, OLD.decision_id,
                            OLD.idempotency_key) THEN
        RAISE EXCEPTION 'gateway call % ended already, or may only end (committed, partial, failed)', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0024_tenant_minutes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="gatewaycall",
            name="idempotency_key",
            field=models.CharField(max_length=255, null=True),
        ),
        migrations.RemoveConstraint(model_name="gatewaycall", name="gateway_call_outcome_known"),
        migrations.AddConstraint(
            model_name="gatewaycall",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "outcome__in",
                        ("admitted", "committed", "partial", "unknown", "failed", "denied", "replayed", "busy"),
                    )
                ),
                name="gateway_call_outcome_known",
            ),
        ),
        migrations.RunSQL(ENDS_ONCE, reverse_sql=ENDS_ONCE_REVERSE),
    ]
