"""Agent memory becomes a place of the payload lifecycle (docs/adr/0038-erasure-lifecycle.md,
docs/adr/0039-agent-memory.md): tombstone columns on steward_memory_record as 0031 added
them to the other payload tables (erased_at, erased_by, erased_hash: nullable, no
default, so adding them rewrites no row), an index on the versions' task (an erasure
of a tree or an owner's tasks finds what they wrote), and a guard: a version is appended, never
rewritten, and afterwards only erased: `payload` to NULL with erased_at set, its hash
and every other column as they were, never while agent code runs. The worker role may
UPDATE exactly those columns for the retention job (runtime/roles.py, granted by
`migrate` after this runs); this trigger admits nothing else, for any role.
Frozen: the SQL below is carried as it ran; the columns are Django's (`sqlmigrate`).
"""

from django.db import migrations, models

MEMORY_GUARD = r"""
CREATE OR REPLACE FUNCTION public.steward_memory_record_only_erased()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- A memory version is appended, never rewritten; afterwards only erased
    -- (runtime/lifecycle/): the payload to NULL, erased_at set, payload_hash and every
    -- other column unchanged, never while agent code runs.
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL AND NEW.payload IS NULL
       AND (to_jsonb(NEW) - 'payload' - 'erased_at' - 'erased_by' - 'erased_hash')
           = (to_jsonb(OLD) - 'payload' - 'erased_at' - 'erased_by' - 'erased_hash') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'refused at storage: memory version % is never rewritten, only erased', OLD.id
        USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE TRIGGER steward_memory_record_only_erased BEFORE UPDATE ON public.steward_memory_record
    FOR EACH ROW EXECUTE FUNCTION steward_memory_record_only_erased();
-- Replica mode skips none of them (migration 0022).
ALTER TABLE steward_memory_record ENABLE ALWAYS TRIGGER steward_memory_record_only_erased;
"""

MEMORY_GUARD_REVERSE = r"""
DROP TRIGGER steward_memory_record_only_erased ON steward_memory_record;
DROP FUNCTION steward_memory_record_only_erased();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0033_version_at_claim"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryrecord",
            name="erased_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memoryrecord",
            name="erased_by",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddField(
            model_name="memoryrecord",
            name="erased_hash",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="memoryrecord",
            index=models.Index(condition=models.Q(("task_id__isnull", False)), fields=["task_id"], name="memory_task"),
        ),
        migrations.RunSQL(MEMORY_GUARD, MEMORY_GUARD_REVERSE),
    ]
