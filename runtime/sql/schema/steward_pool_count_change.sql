CREATE OR REPLACE FUNCTION public.steward_pool_count_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    p text;
    d integer;
BEGIN
    -- The WHEN clauses let us in only if the row entered or left the set.
    IF TG_OP = 'INSERT' THEN
        p := NEW.pool; d := 1;
    ELSIF TG_OP = 'DELETE' THEN
        p := OLD.pool; d := -1;
    ELSIF OLD.pool = NEW.pool THEN
        p := NEW.pool; d := CASE WHEN NEW.status IN ('queued', 'running') THEN 1 ELSE -1 END;
    ELSE
        -- Moved between pools (nothing does this today): one change for each side.
        IF OLD.status IN ('queued', 'running') THEN
            PERFORM steward_pool_count_add(OLD.pool, -1);
        END IF;
        IF NEW.status IN ('queued', 'running') THEN
            PERFORM steward_pool_count_add(NEW.pool, 1);
        END IF;
        RETURN NULL;
    END IF;
    -- steward_pool_count_add() inlined: a nested call costs as much as the UPDATE.
    UPDATE steward_pool_count SET admitted = admitted + d WHERE pool = p AND shard = pg_backend_pid();
    IF NOT FOUND THEN
        PERFORM steward_pool_count_add(p, d);
    END IF;
    RETURN NULL;
END
$function$;

CREATE TRIGGER steward_pool_count_delete AFTER DELETE ON public.steward_task FOR EACH ROW WHEN (((old.status)::text = ANY ((ARRAY['queued'::character varying, 'running'::character varying])::text[]))) EXECUTE FUNCTION steward_pool_count_change();

CREATE TRIGGER steward_pool_count_insert AFTER INSERT ON public.steward_task FOR EACH ROW WHEN (((new.status)::text = ANY ((ARRAY['queued'::character varying, 'running'::character varying])::text[]))) EXECUTE FUNCTION steward_pool_count_change();

CREATE TRIGGER steward_pool_count_update AFTER UPDATE OF status, pool ON public.steward_task FOR EACH ROW WHEN (((((old.status)::text = ANY ((ARRAY['queued'::character varying, 'running'::character varying])::text[])) <> ((new.status)::text = ANY ((ARRAY['queued'::character varying, 'running'::character varying])::text[]))) OR (((old.pool)::text <> (new.pool)::text) AND ((new.status)::text = ANY ((ARRAY['queued'::character varying, 'running'::character varying])::text[]))))) EXECUTE FUNCTION steward_pool_count_change();
