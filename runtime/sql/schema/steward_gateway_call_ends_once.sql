CREATE OR REPLACE FUNCTION public.steward_gateway_call_ends_once()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'steward_gateway_call rows are never deleted' USING ERRCODE = 'restrict_violation';
    END IF;
    -- A tombstone (runtime/lifecycle/): only the payload and the erased_* columns move,
    -- never while agent code runs.
    IF coalesce(current_setting('steward.agent_task', true), '') = ''
       AND OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL AND NEW.outcome = OLD.outcome
       AND NEW.receipt IS NULL AND NEW.response IS NULL
       AND (NEW.id, NEW.tenant, NEW.task_id, NEW.epoch, NEW.jti, NEW.decision_id, NEW.idempotency_key,
            NEW.status, NEW.tokens, NEW.finished_at)
           IS NOT DISTINCT FROM (OLD.id, OLD.tenant, OLD.task_id, OLD.epoch, OLD.jti, OLD.decision_id,
                                 OLD.idempotency_key, OLD.status, OLD.tokens, OLD.finished_at) THEN
        RETURN NEW;
    END IF;
    IF OLD.outcome <> 'admitted' OR NEW.outcome NOT IN ('committed', 'partial', 'unknown', 'failed')
       OR (NEW.id, NEW.tenant, NEW.task_id, NEW.epoch, NEW.jti, NEW.decision_id, NEW.idempotency_key)
          IS DISTINCT FROM (OLD.id, OLD.tenant, OLD.task_id, OLD.epoch, OLD.jti, OLD.decision_id,
                            OLD.idempotency_key) THEN
        RAISE EXCEPTION 'gateway call % ended already, or may only end (committed, partial, unknown, failed)', OLD.id
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $function$;

CREATE TRIGGER steward_gateway_call_ends_once BEFORE DELETE OR UPDATE ON public.steward_gateway_call FOR EACH ROW EXECUTE FUNCTION steward_gateway_call_ends_once();
