CREATE OR REPLACE FUNCTION public.steward_audit_peoples_kinds()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.kind LIKE ANY (ARRAY['grant.%', 'approval.approved', 'approval.denied', 'budget.%', 'quota.%', 'token.%', 'member.%', 'agent.steward_%', 'pool.limits', 'pool.removed', 'signin.%'])
       AND NOT has_table_privilege('public.steward_grant'::regclass, 'INSERT') THEN
        RAISE EXCEPTION 'refused at storage: role % writes no % audit row (a person''s act)', current_user, NEW.kind
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $function$;

CREATE TRIGGER steward_audit_peoples_kinds BEFORE INSERT ON public.steward_audit FOR EACH ROW EXECUTE FUNCTION steward_audit_peoples_kinds();
