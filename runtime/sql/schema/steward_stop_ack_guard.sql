CREATE OR REPLACE FUNCTION public.steward_stop_ack_guard()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        RAISE EXCEPTION 'refused at storage: a stop acknowledgment is never changed or removed'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF coalesce(current_setting('steward.agent_task', true), '') <> '' THEN
        RAISE EXCEPTION 'refused at storage: steward_stop_ack is never written while agent code runs (task %)',
            current_setting('steward.agent_task') USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $function$;

CREATE TRIGGER steward_stop_ack_guard BEFORE INSERT OR DELETE OR UPDATE ON public.steward_stop_ack FOR EACH ROW EXECUTE FUNCTION steward_stop_ack_guard();
