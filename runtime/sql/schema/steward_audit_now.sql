CREATE OR REPLACE FUNCTION public.steward_audit_now()
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    RETURN now();
END
$function$;
