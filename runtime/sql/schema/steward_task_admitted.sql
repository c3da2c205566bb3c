CREATE OR REPLACE FUNCTION public.steward_task_admitted()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM steward_agent_switch_lock(NEW.tenant, NEW.agent, false);
    IF EXISTS (SELECT 1 FROM steward_agent_switch s
               WHERE s.tenant = NEW.tenant AND s.agent = NEW.agent AND s.closed) THEN
        RAISE EXCEPTION 'agent % is stopped in tenant %: submission is closed until it is reopened',
            NEW.agent, NEW.tenant USING ERRCODE = 'SW001';
    END IF;
    RETURN NEW;
END $function$;

CREATE TRIGGER steward_task_admitted BEFORE INSERT ON public.steward_task FOR EACH ROW EXECUTE FUNCTION steward_task_admitted();
