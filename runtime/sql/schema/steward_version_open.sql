CREATE OR REPLACE FUNCTION public.steward_version_open(p_agent text, p_version text)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'steward_test_clock', 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    -- NULL: the claiming worker does not serve this agent at all.
    IF p_version IS NULL THEN
        RETURN false;
    END IF;
    -- The key of runtime/sql/version_lock.sql, which a retire takes exclusively.
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('steward_version:' || p_agent || ':' || p_version, 0));
    RETURN NOT EXISTS (SELECT 1 FROM steward_retired_version r WHERE r.agent = p_agent AND r.version = p_version);
END
$function$;
