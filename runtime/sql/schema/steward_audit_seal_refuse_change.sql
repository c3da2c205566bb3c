CREATE OR REPLACE FUNCTION public.steward_audit_seal_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'steward_audit_seal is append-only: % refused on seal %', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$function$;

CREATE TRIGGER steward_audit_seal_append_only BEFORE DELETE OR UPDATE ON public.steward_audit_seal FOR EACH ROW EXECUTE FUNCTION steward_audit_seal_refuse_change();
