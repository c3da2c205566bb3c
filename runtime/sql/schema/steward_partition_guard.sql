CREATE OR REPLACE FUNCTION public.steward_partition_guard(p_partition text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION steward_refuse_truncate()',
                   p_partition || '_no_truncate', p_partition);
    EXECUTE format('ALTER TABLE %I ENABLE ALWAYS TRIGGER %I', p_partition, p_partition || '_no_truncate');
END
$function$;
