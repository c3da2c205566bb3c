CREATE OR REPLACE FUNCTION public.steward_pool_count_truncate()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM steward_pool_count;
    RETURN NULL;
END
$function$;

CREATE TRIGGER steward_pool_count_truncate AFTER TRUNCATE ON public.steward_task FOR EACH STATEMENT EXECUTE FUNCTION steward_pool_count_truncate();
