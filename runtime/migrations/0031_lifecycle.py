"""Lifecycle (issue 25, docs/adr/0038-erasure-lifecycle.md): tombstone columns on every
table that holds a payload (erased_at, erased_by, erased_hash: nullable, no default, so
adding them rewrites no row), a tenant's retention periods (steward_retention_policy) and
the signed receipts of erasures by subject (steward_erasure_receipt, append-only).

Two guards learn the tombstone: a gateway call that ended may still be tombstoned (its
identity and outcome unchanged), and an approval may be tombstoned by a role that cannot
decide it (the retention job runs as the worker role), each only to its tombstone and
never while agent code runs; the approval's state moves no longer carry its action or
context with them. A new guard holds a task's input: written once, afterwards only erased.
Frozen: the SQL below is carried as it ran; the columns are Django's (`sqlmigrate`).
"""

import django.db.models.functions.datetime
from django.db import migrations, models

import runtime.ids

GATEWAY_GUARD = r"""
CREATE OR REPLACE FUNCTION public.steward_gateway_call_ends_once()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'steward_gateway_call rows are never deleted' USING ERRCODE = 'restrict_violation';
    END IF;
    -- A tombstone (runtime/lifecycle/): only the payload and the erased_* columns move,
    -- never while agent code runs.
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL AND NEW.outcome = OLD.outcome
       AND NEW.receipt IS NULL AND NEW.response IS NULL
       AND (NEW.id, NEW.tenant, NEW.task_id, NEW.epoch, NEW.jti, NEW.decision_id, NEW.idempotency_key,
            NEW.status, NEW.tokens, NEW.finished_at)
           IS NOT DISTINCT FROM (OLD.id, OLD.tenant, OLD.task_id, OLD.epoch, OLD.jti, OLD.decision_id,
                                 OLD.idempotency_key, OLD.status, OLD.tokens, OLD.finished_at) THEN
        RETURN NEW;
    END IF;
    IF OLD.outcome <> 'admitted' OR NEW.outcome NOT IN ('committed', 'partial', 'unknown', 'failed')
       OR (NEW.id, NEW.tenant, NEW.task_id, NEW.epoch, NEW.jti, NEW.decision_id, NEW.idempotency_key)
          IS DISTINCT FROM (OLD.id, OLD.tenant, OLD.task_id, OLD.epoch, OLD.jti, OLD.decision_id,
                            OLD.idempotency_key) THEN
        RAISE EXCEPTION 'gateway call % ended already, or may only end (committed, partial, unknown, failed)', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $function$;
"""

GATEWAY_GUARD_REVERSE = r"""
CREATE OR REPLACE FUNCTION public.steward_gateway_call_ends_once()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$;
"""

APPROVAL_GUARD = r"""
CREATE OR REPLACE FUNCTION public.steward_approval_not_decided_by_agent_code()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND has_column_privilege('public.steward_approval'::regclass, 'decided_by', 'UPDATE') THEN
        RETURN coalesce(NEW, OLD);
    END IF;
    IF TG_OP = 'INSERT' AND NEW.state = 'pending' AND NEW.decided_by IS NULL THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state IN ('expired', 'stale', 'consumed')
       AND NEW.decided_by IS NOT DISTINCT FROM OLD.decided_by
       AND NEW.comment = OLD.comment
       AND NEW.action_hash = OLD.action_hash AND NEW.context_digest = OLD.context_digest
       AND NEW.expires_at = OLD.expires_at AND NEW.task_id = OLD.task_id
       AND NEW.action = OLD.action AND NEW.context = OLD.context
       AND NEW.erased_at IS NOT DISTINCT FROM OLD.erased_at THEN
        RETURN NEW;
    END IF;
    -- A tombstone by the retention job (the worker role), never while agent code runs:
    -- the package's decision, its hashes and its binding stay as they were.
    IF TG_OP = 'UPDATE' AND coalesce(current_setting('steward.agent_task', true), '') = ''
       AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL AND NEW.state = OLD.state
       AND NEW.action = 'null'::jsonb AND NEW.context = 'null'::jsonb
       AND NEW.decided_by IS NOT DISTINCT FROM OLD.decided_by AND NEW.comment = OLD.comment
       AND NEW.action_hash = OLD.action_hash AND NEW.context_digest = OLD.context_digest
       AND NEW.expires_at = OLD.expires_at AND NEW.task_id = OLD.task_id THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'refused at storage: an approval is never decided while agent code runs, nor by role % (task %)',
        current_user, coalesce(current_setting('steward.agent_task', true), '') USING ERRCODE = 'insufficient_privilege';
END $function$;
"""

APPROVAL_GUARD_REVERSE = r"""
CREATE OR REPLACE FUNCTION public.steward_approval_not_decided_by_agent_code()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND has_column_privilege('public.steward_approval'::regclass, 'decided_by', 'UPDATE') THEN
        RETURN coalesce(NEW, OLD);
    END IF;
    IF TG_OP = 'INSERT' AND NEW.state = 'pending' AND NEW.decided_by IS NULL THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.state IN ('expired', 'stale', 'consumed')
       AND NEW.decided_by IS NOT DISTINCT FROM OLD.decided_by
       AND NEW.comment = OLD.comment
       AND NEW.action_hash = OLD.action_hash AND NEW.context_digest = OLD.context_digest
       AND NEW.expires_at = OLD.expires_at AND NEW.task_id = OLD.task_id THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'refused at storage: an approval is never decided while agent code runs, nor by role % (task %)',
        current_user, coalesce(current_setting('steward.agent_task', true), '') USING ERRCODE = 'insufficient_privilege';
END $function$;
"""

TASK_INPUT_GUARD = r"""
CREATE OR REPLACE FUNCTION public.steward_task_input_only_erased()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- A task's input is written once, by steward_submit(), and afterwards only erased
    -- (runtime/lifecycle/): to its tombstone, with erased_at set and its digest kept,
    -- never while agent code runs. The worker role may move `input` for the retention job.
    IF NEW.input IS NOT DISTINCT FROM OLD.input THEN
        RETURN NEW;
    END IF;
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND NEW.input = 'null'::jsonb AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL
       AND NEW.input_digest = OLD.input_digest THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'refused at storage: task %''s input is never rewritten, only erased', OLD.id
        USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE TRIGGER steward_task_input_only_erased BEFORE UPDATE OF input ON public.steward_task
    FOR EACH ROW EXECUTE FUNCTION steward_task_input_only_erased();
ALTER TABLE steward_task ENABLE ALWAYS TRIGGER steward_task_input_only_erased;
"""

TASK_INPUT_GUARD_REVERSE = r"""
DROP TRIGGER steward_task_input_only_erased ON steward_task;
DROP FUNCTION steward_task_input_only_erased();
"""

RECEIPTS_APPEND_ONLY = r"""
CREATE OR REPLACE FUNCTION public.steward_erasure_receipt_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'steward_erasure_receipt is append-only: % refused on receipt %', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$function$;

CREATE TRIGGER steward_erasure_receipt_append_only BEFORE DELETE OR UPDATE ON public.steward_erasure_receipt
    FOR EACH ROW EXECUTE FUNCTION steward_erasure_receipt_refuse_change();
CREATE TRIGGER steward_erasure_receipt_no_truncate BEFORE TRUNCATE ON public.steward_erasure_receipt
    FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();
-- Replica mode skips none of them (migration 0022).
ALTER TABLE steward_erasure_receipt ENABLE ALWAYS TRIGGER steward_erasure_receipt_append_only;
ALTER TABLE steward_erasure_receipt ENABLE ALWAYS TRIGGER steward_erasure_receipt_no_truncate;
"""

RECEIPTS_APPEND_ONLY_REVERSE = r"""
DROP TRIGGER steward_erasure_receipt_no_truncate ON steward_erasure_receipt;
DROP TRIGGER steward_erasure_receipt_append_only ON steward_erasure_receipt;
DROP FUNCTION steward_erasure_receipt_refuse_change();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0030_agent_memory"),
    ]

    operations = [
        migrations.AddField(
            model_name="approval",
            name="erased_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="erased_by",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="approval",
            name="erased_hash",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="effect",
            name="erased_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="effect",
            name="erased_by",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="effect",
            name="erased_hash",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="gatewaycall",
            name="erased_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="gatewaycall",
            name="erased_by",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="gatewaycall",
            name="erased_hash",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="step",
            name="erased_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="step",
            name="erased_by",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="step",
            name="erased_hash",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="erased_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="erased_by",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="task",
            name="erased_hash",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="ErasureReceipt",
            fields=[
                ("id", models.UUIDField(default=runtime.ids.uuid7, editable=False, primary_key=True, serialize=False)),
                ("tenant", models.CharField(max_length=100)),
                ("subject_kind", models.CharField(max_length=16)),
                ("subject", models.CharField(max_length=200)),
                ("actor", models.CharField(max_length=200)),
                ("reason", models.CharField(max_length=2000)),
                ("created_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("rows", models.BigIntegerField(help_text="Rows tombstoned, over every place.")),
                ("body", models.JSONField()),
                ("key_id", models.CharField(max_length=16)),
                ("mac", models.BinaryField()),
            ],
            options={
                "db_table": "steward_erasure_receipt",
                "indexes": [models.Index(fields=["tenant", "id"], name="erasure_receipt_tenant_id")],
            },
        ),
        migrations.CreateModel(
            name="RetentionPolicy",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("tenant", models.CharField(max_length=100, unique=True)),
                (
                    "task_days",
                    models.IntegerField(blank=True, help_text="Finished tasks' inputs, outputs, journal.", null=True),
                ),
                (
                    "gateway_days",
                    models.IntegerField(blank=True, help_text="Gateway calls' receipts and responses.", null=True),
                ),
                ("memory_days", models.IntegerField(blank=True, help_text="Agent memory records.", null=True)),
                ("decision_days", models.IntegerField(blank=True, help_text="Authorization decisions.", null=True)),
                (
                    "audit_days",
                    models.IntegerField(blank=True, help_text="The audit trail; >= every other period.", null=True),
                ),
                ("version", models.IntegerField(default=1)),
                ("updated_by", models.CharField(max_length=200)),
                ("updated_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                "db_table": "steward_retention_policy",
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("task_days__isnull", True), ("task_days__gte", 1), _connector="OR"),
                            models.Q(("gateway_days__isnull", True), ("gateway_days__gte", 1), _connector="OR"),
                            models.Q(("memory_days__isnull", True), ("memory_days__gte", 1), _connector="OR"),
                            models.Q(("decision_days__isnull", True), ("decision_days__gte", 1), _connector="OR"),
                            models.Q(("audit_days__isnull", True), ("audit_days__gte", 1), _connector="OR"),
                        ),
                        name="retention_days_positive",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("audit_days__isnull", True),
                            models.Q(
                                ("task_days__isnull", False),
                                ("task_days__lte", models.F("audit_days")),
                                ("gateway_days__isnull", False),
                                ("gateway_days__lte", models.F("audit_days")),
                                ("memory_days__isnull", False),
                                ("memory_days__lte", models.F("audit_days")),
                                ("decision_days__isnull", False),
                                ("decision_days__lte", models.F("audit_days")),
                            ),
                            _connector="OR",
                        ),
                        name="retention_audit_longest",
                    ),
                ],
            },
        ),
        migrations.RunSQL(GATEWAY_GUARD, GATEWAY_GUARD_REVERSE),
        migrations.RunSQL(APPROVAL_GUARD, APPROVAL_GUARD_REVERSE),
        migrations.RunSQL(TASK_INPUT_GUARD, TASK_INPUT_GUARD_REVERSE),
        migrations.RunSQL(RECEIPTS_APPEND_ONLY, RECEIPTS_APPEND_ONLY_REVERSE),
    ]
