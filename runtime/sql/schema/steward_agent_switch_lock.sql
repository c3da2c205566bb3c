CREATE OR REPLACE FUNCTION public.steward_agent_switch_lock(p_tenant text, p_agent text, p_exclusive boolean)
 RETURNS void
 LANGUAGE sql
AS $function$
    SELECT CASE WHEN p_exclusive THEN pg_advisory_xact_lock(hashtextextended(p_tenant || '/' || p_agent, 14))
                ELSE pg_advisory_xact_lock_shared(hashtextextended(p_tenant || '/' || p_agent, 14)) END
$function$;
