CREATE OR REPLACE FUNCTION public.steward_refuse_truncate()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'refused at storage: % keeps every row; TRUNCATE is never allowed', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE TRIGGER steward_audit_no_truncate BEFORE TRUNCATE ON public.steward_audit FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();

CREATE TRIGGER steward_audit_seal_no_truncate BEFORE TRUNCATE ON public.steward_audit_seal FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();

CREATE TRIGGER steward_audit_seal_head_no_truncate BEFORE TRUNCATE ON public.steward_audit_seal_head FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();

CREATE TRIGGER steward_decision_no_truncate BEFORE TRUNCATE ON public.steward_decision FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();

CREATE TRIGGER steward_erasure_receipt_no_truncate BEFORE TRUNCATE ON public.steward_erasure_receipt FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();

CREATE TRIGGER steward_gateway_call_no_truncate BEFORE TRUNCATE ON public.steward_gateway_call FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();

CREATE TRIGGER steward_grant_no_truncate BEFORE TRUNCATE ON public.steward_grant FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();

CREATE TRIGGER steward_stop_ack_no_truncate BEFORE TRUNCATE ON public.steward_stop_ack FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate();
