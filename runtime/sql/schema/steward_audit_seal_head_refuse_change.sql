CREATE OR REPLACE FUNCTION public.steward_audit_seal_head_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'steward_audit_seal_head is append-only: % refused on head %', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$function$;

CREATE TRIGGER steward_audit_seal_head_append_only BEFORE DELETE OR UPDATE ON public.steward_audit_seal_head FOR EACH ROW EXECUTE FUNCTION steward_audit_seal_head_refuse_change();
