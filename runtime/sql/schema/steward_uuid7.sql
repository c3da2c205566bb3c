CREATE OR REPLACE FUNCTION public.steward_uuid7(at timestamp with time zone)
 RETURNS uuid
 LANGUAGE sql
AS $function$
    SELECT encode(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 'hex')::uuid
    FROM (SELECT overlay(uuid_send(gen_random_uuid())
                         PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
                         FROM 1 FOR 6) AS b) AS random
$function$;
