CREATE OR REPLACE FUNCTION public.steward_budget_not_from_agent_code()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF coalesce(current_setting('steward.agent_task', true), '') <> '' THEN
        RAISE EXCEPTION 'refused at storage: % is never written while agent code runs (task %)',
            TG_TABLE_NAME, current_setting('steward.agent_task') USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN coalesce(NEW, OLD);
END $function$;

CREATE TRIGGER steward_budget_not_from_agent_code BEFORE INSERT OR DELETE OR UPDATE ON public.steward_budget FOR EACH ROW EXECUTE FUNCTION steward_budget_not_from_agent_code();

CREATE TRIGGER steward_budget_not_from_agent_code BEFORE INSERT OR DELETE OR UPDATE ON public.steward_quota FOR EACH ROW EXECUTE FUNCTION steward_budget_not_from_agent_code();

CREATE TRIGGER steward_budget_not_from_agent_code BEFORE INSERT OR DELETE OR UPDATE ON public.steward_token_usage FOR EACH ROW EXECUTE FUNCTION steward_budget_not_from_agent_code();

CREATE TRIGGER steward_tree_pause_not_from_agent_code BEFORE INSERT OR DELETE OR UPDATE ON public.steward_tree_pause FOR EACH ROW EXECUTE FUNCTION steward_budget_not_from_agent_code();
