CREATE OR REPLACE FUNCTION public.steward_grant_only_shrinks()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'steward_grant rows are never deleted; revoke the grant instead'
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.revoked_at IS NOT NULL THEN
        RAISE EXCEPTION 'grant % is revoked; a revocation is final', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF (NEW.tenant, NEW.principal, NEW.action, NEW.granted_by, NEW.granted_at)
       IS DISTINCT FROM (OLD.tenant, OLD.principal, OLD.action, OLD.granted_by, OLD.granted_at) THEN
        RAISE EXCEPTION 'grant % may not change whom, what or by whom it grants', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    -- A resource narrows to itself or, under a prefix pattern `p*`, to anything that
    -- starts with `p` (runtime/authz/patterns.py is the same rule in Python).
    IF NEW.resource <> OLD.resource AND NOT (
           right(OLD.resource, 1) = '*' AND starts_with(NEW.resource, left(OLD.resource, -1))) THEN
        RAISE EXCEPTION 'grant % may only narrow its resource', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.expires_at IS NOT NULL AND (NEW.expires_at IS NULL OR NEW.expires_at > OLD.expires_at) THEN
        RAISE EXCEPTION 'grant % may only bring its expiry earlier', OLD.id USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $function$;

CREATE TRIGGER steward_grant_only_shrinks BEFORE DELETE OR UPDATE ON public.steward_grant FOR EACH ROW EXECUTE FUNCTION steward_grant_only_shrinks();
