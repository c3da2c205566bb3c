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

CREATE TRIGGER steward_approval_not_decided_by_agent_code BEFORE INSERT OR DELETE OR UPDATE ON public.steward_approval FOR EACH ROW EXECUTE FUNCTION steward_approval_not_decided_by_agent_code();
