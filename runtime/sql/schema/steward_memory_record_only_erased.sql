CREATE OR REPLACE FUNCTION public.steward_memory_record_only_erased()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- A memory version is appended, never rewritten; afterwards only erased
    -- (runtime/lifecycle/): the payload to NULL, erased_at set, payload_hash and every
    -- other column unchanged, never while agent code runs.
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL AND NEW.payload IS NULL
       AND (to_jsonb(NEW) - 'payload' - 'erased_at' - 'erased_by' - 'erased_hash')
           = (to_jsonb(OLD) - 'payload' - 'erased_at' - 'erased_by' - 'erased_hash') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'refused at storage: memory version % is never rewritten, only erased', OLD.id
        USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE TRIGGER steward_memory_record_only_erased BEFORE UPDATE ON public.steward_memory_record FOR EACH ROW EXECUTE FUNCTION steward_memory_record_only_erased();
