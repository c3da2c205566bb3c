CREATE OR REPLACE FUNCTION public.steward_erasure_receipt_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'steward_erasure_receipt is append-only: % refused on receipt %', TG_OP, OLD.id
        USING ERRCODE = 'insufficient_privilege';
END
$function$;

CREATE TRIGGER steward_erasure_receipt_append_only BEFORE DELETE OR UPDATE ON public.steward_erasure_receipt FOR EACH ROW EXECUTE FUNCTION steward_erasure_receipt_refuse_change();
