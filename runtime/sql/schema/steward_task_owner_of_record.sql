CREATE OR REPLACE FUNCTION public.steward_task_owner_of_record()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$;

CREATE TRIGGER steward_task_owner_of_record BEFORE INSERT ON public.steward_task FOR EACH ROW EXECUTE FUNCTION steward_task_owner_of_record();
