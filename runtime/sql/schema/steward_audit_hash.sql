CREATE OR REPLACE FUNCTION public.steward_audit_hash(prev_hash bytea, chain text, chain_seq integer, at timestamp with time zone, actor text, tenant text, task_id uuid, kind text, data jsonb)
 RETURNS bytea
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT sha256(convert_to(concat_ws(E'\x1f',
        encode(prev_hash, 'hex'), chain, chain_seq::text,
        (extract(epoch FROM at) * 1000000)::bigint::text,
        actor, tenant, coalesce(task_id::text, ''), kind, data::text), 'UTF8'))
$function$;
