CREATE OR REPLACE FUNCTION public.steward_pool_first_use(p_name text, p_max_running integer, p_max_queued integer)
 RETURNS boolean
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'steward_test_clock', 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    INSERT INTO steward_pool (name, max_running, max_queued) VALUES (p_name, p_max_running, p_max_queued)
    ON CONFLICT (name) DO NOTHING;
    RETURN FOUND;
END $function$;
