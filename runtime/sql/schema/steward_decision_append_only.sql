CREATE OR REPLACE FUNCTION public.steward_decision_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'steward_decision is append-only (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END $function$;

CREATE TRIGGER steward_decision_append_only BEFORE DELETE OR UPDATE ON public.steward_decision FOR EACH ROW EXECUTE FUNCTION steward_decision_append_only();
