CREATE OR REPLACE FUNCTION public.steward_uuid7_time(id uuid)
 RETURNS timestamp with time zone
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT to_timestamp(('x' || lpad(left(replace(id::text, '-', ''), 12), 16, '0'))::bit(64)::bigint / 1000.0)
$function$;
