CREATE OR REPLACE FUNCTION public.steward_audit_chain(task_id uuid, tenant text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN task_id IS NOT NULL THEN 'task:' || task_id ELSE 'tenant:' || tenant END
$function$;
