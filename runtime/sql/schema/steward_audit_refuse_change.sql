CREATE OR REPLACE FUNCTION public.steward_audit_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'steward_audit is append-only: % refused on row %', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$function$;

CREATE TRIGGER steward_audit_append_only BEFORE DELETE OR UPDATE ON public.steward_audit FOR EACH ROW EXECUTE FUNCTION steward_audit_refuse_change();
