CREATE OR REPLACE FUNCTION public.steward_grant_not_from_agent_code()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF coalesce(current_setting('steward.agent_task', true), '') <> '' THEN
        RAISE EXCEPTION 'refused at storage: steward_grant is never written while agent code runs (task %)',
            current_setting('steward.agent_task') USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN coalesce(NEW, OLD);
END $function$;

CREATE TRIGGER steward_grant_not_from_agent_code BEFORE INSERT OR DELETE OR UPDATE ON public.steward_grant FOR EACH ROW EXECUTE FUNCTION steward_grant_not_from_agent_code();
