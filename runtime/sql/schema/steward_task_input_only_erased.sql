CREATE OR REPLACE FUNCTION public.steward_task_input_only_erased()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- A task's input is written once, by steward_submit(), and afterwards only erased
    -- (runtime/lifecycle/): to its tombstone, with erased_at set and its digest kept,
    -- never while agent code runs. The worker role may move `input` for the retention job.
    IF NEW.input IS NOT DISTINCT FROM OLD.input THEN
        RETURN NEW;
    END IF;
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND NEW.input = 'null'::jsonb AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL
       AND NEW.input_digest = OLD.input_digest THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'refused at storage: task %''s input is never rewritten, only erased', OLD.id
        USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE TRIGGER steward_task_input_only_erased BEFORE UPDATE OF input ON public.steward_task FOR EACH ROW EXECUTE FUNCTION steward_task_input_only_erased();
