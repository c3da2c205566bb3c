"""The worker role (docs/adr/0035-web-and-worker-roles.md): who may decide an approval,
and who may lock a pool's row to admit a task, are PostgreSQL privileges, not a session
setting the same session can change (issue 21). Frozen: the SQL below is carried as it ran.

* steward_pool_first_use(): the same, for the one pool write a worker makes: adding the
  default pool or an agent's declared pool at its first use (runtime/limits/services.py),
  never changing or removing a pool.
* steward_approval_not_decided_by_agent_code(): a package is approved or denied, its bound
  fields changed, or deleted, only by a role that holds UPDATE on its `decided_by` column
  (the web role; runtime/roles.py gives the worker role `state`, `stale_reason`,
  `checked_at` and `decided_at` alone), and never from a connection marked as running
  agent code. The column is checked on public.steward_approval by its qualified name, so a
  temporary table of that name proves nothing.
* steward_audit_peoples_kinds(): an audit row of a person's act (a grant's, a decided
  approval's, a budget's, a quota's, a token's, a member's...) is appended only by a role
  that may write grants: the worker role appends the runtime's own rows, and cannot
  forge "dave granted" into the trail. A BEFORE INSERT row trigger, ENABLE ALWAYS as the
  other guards of the trail are (migration 0022).
* steward_task_owner_of_record(): a task is created by a role without the web's
  privileges (the worker role, through steward_submit(); it has no INSERT on steward_task)
  only as a child with its parent's tenant, owner and root, or as the task of a schedule
  or a dependency trigger with that trigger's tenant, owner and agent. Agent code cannot
  submit work on someone else's authority. The caller is session_user: inside the
  definer function current_user is the owner.
* steward_submit(): SECURITY DEFINER, owned by the schema's owner, its search_path
  pinned. It locks the pool's row FOR UPDATE, which takes UPDATE on steward_pool, and the
  worker role (spawns, schedules) holds none on that governance table. It only admits a
  task into the pool it names, as before; EXECUTE on it is taken from PUBLIC and given
  back to each application role by `migrate`'s grant step. The harness's clock schema
  (runtime/testing.py) stays in the pinned path: absent outside the tests, it is skipped,
  and only the owner could create it.
"""

from django.db import migrations

SUBMIT = "steward_submit(uuid, text, jsonb, text, text, text, text, text, text, jsonb, uuid, uuid, integer)"

PINNED = f"""
ALTER FUNCTION {SUBMIT} SECURITY DEFINER SET search_path = public, steward_test_clock, pg_catalog, pg_temp;
REVOKE EXECUTE ON FUNCTION {SUBMIT} FROM PUBLIC;
"""

PINNED_REVERSE = f"""
ALTER FUNCTION {SUBMIT} SECURITY INVOKER RESET search_path;
GRANT EXECUTE ON FUNCTION {SUBMIT} TO PUBLIC;
"""

POOL_FIRST_USE = """
CREATE FUNCTION steward_pool_first_use(p_name text, p_max_running integer, p_max_queued integer)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, steward_test_clock, pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO steward_pool (name, max_running, max_queued) VALUES (p_name, p_max_running, p_max_queued)
    ON CONFLICT (name) DO NOTHING;
    RETURN FOUND;
END $$;
REVOKE EXECUTE ON FUNCTION steward_pool_first_use(text, integer, integer) FROM PUBLIC;
"""

# The kinds of audit row only a person's act writes (runtime/audit.py AuditKind), each in
# the same transaction as its change to a governance table.
PEOPLES_KINDS = (
    "grant.%",
    "approval.approved",
    "approval.denied",
    "budget.%",
    "quota.%",
    "token.%",
    "member.%",
    "agent.steward_%",
    "pool.limits",
    "pool.removed",
    "signin.%",
)

AUDIT_PEOPLES_KINDS = f"""
CREATE FUNCTION steward_audit_peoples_kinds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind LIKE ANY (ARRAY[{", ".join(f"'{k}'" for k in PEOPLES_KINDS)}])
       AND NOT has_table_privilege('public.steward_grant'::regclass, 'INSERT') THEN
        RAISE EXCEPTION 'refused at storage: role % writes no % audit row (a person''s act)', current_user, NEW.kind
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER steward_audit_peoples_kinds BEFORE INSERT ON steward_audit
    FOR EACH ROW EXECUTE FUNCTION steward_audit_peoples_kinds();
ALTER TABLE steward_audit ENABLE ALWAYS TRIGGER steward_audit_peoples_kinds;
"""

AUDIT_PEOPLES_KINDS_REVERSE = """
DROP TRIGGER steward_audit_peoples_kinds ON steward_audit;
DROP FUNCTION steward_audit_peoples_kinds();
"""

# Inside steward_submit() (SECURITY DEFINER) current_user is the owner: the caller is
# session_user, which no one but a superuser can change.
TASK_OWNER_OF_RECORD = """
CREATE FUNCTION steward_task_owner_of_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF has_table_privilege(session_user, 'public.steward_grant', 'INSERT') THEN
        RETURN NEW;
    END IF;
    IF NEW.parent_id IS NOT NULL AND EXISTS (
           SELECT 1 FROM public.steward_task p
           WHERE p.id = NEW.parent_id AND p.tenant = NEW.tenant AND p.owner = NEW.owner AND p.root_id = NEW.root_id)
       OR NEW.parent_id IS NULL AND (
           EXISTS (SELECT 1 FROM public.steward_schedule s
                   WHERE s.tenant = NEW.tenant AND s.owner = NEW.owner AND s.agent = NEW.agent)
           OR EXISTS (SELECT 1 FROM public.steward_dependency_trigger d
                      WHERE d.tenant = NEW.tenant AND d.owner = NEW.owner AND d.agent = NEW.agent)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'refused at storage: role % submits a task only as its parent''s owner or a trigger''s (owner %)',
        session_user, NEW.owner USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER steward_task_owner_of_record BEFORE INSERT ON steward_task
    FOR EACH ROW EXECUTE FUNCTION steward_task_owner_of_record();
ALTER TABLE steward_task ENABLE ALWAYS TRIGGER steward_task_owner_of_record;
"""

TASK_OWNER_OF_RECORD_REVERSE = """
DROP TRIGGER steward_task_owner_of_record ON steward_task;
DROP FUNCTION steward_task_owner_of_record();
"""

APPROVAL_GUARD = """
CREATE OR REPLACE FUNCTION steward_approval_not_decided_by_agent_code() RETURNS trigger LANGUAGE plpgsql AS $$
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
END $$;
"""

APPROVAL_GUARD_REVERSE = """
CREATE OR REPLACE FUNCTION steward_approval_not_decided_by_agent_code() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('steward.agent_task', true), '') = '' THEN
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
    RAISE EXCEPTION 'refused at storage: an approval is never decided while agent code runs (task %)',
        current_setting('steward.agent_task') USING ERRCODE = 'insufficient_privilege';
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runtime", "0026_worker_credentials"),
    ]

    operations = [
        migrations.RunSQL(PINNED, PINNED_REVERSE),
        migrations.RunSQL(POOL_FIRST_USE, "DROP FUNCTION steward_pool_first_use(text, integer, integer)"),
        migrations.RunSQL(APPROVAL_GUARD, APPROVAL_GUARD_REVERSE),
        migrations.RunSQL(AUDIT_PEOPLES_KINDS, AUDIT_PEOPLES_KINDS_REVERSE),
        migrations.RunSQL(TASK_OWNER_OF_RECORD, TASK_OWNER_OF_RECORD_REVERSE),
    ]
