CREATE OR REPLACE FUNCTION public.steward_pool_count_add(p_pool text, p_delta integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE steward_pool_count SET admitted = admitted + p_delta
    WHERE pool = p_pool AND shard = pg_backend_pid();
    IF NOT FOUND THEN
        INSERT INTO steward_pool_count (pool, shard, admitted) VALUES (p_pool, pg_backend_pid(), p_delta)
        ON CONFLICT (pool, shard) DO UPDATE SET admitted = steward_pool_count.admitted + EXCLUDED.admitted;
    END IF;
END
$function$;
