CREATE OR REPLACE FUNCTION public.steward_audit_link()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    tail record;
BEGIN
    NEW.chain := steward_audit_chain(NEW.task_id, NEW.tenant);
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.chain, 0));
    NEW.at := now();
    SELECT a.chain_seq, a.hash, a.at INTO tail
    FROM steward_audit a WHERE a.chain = NEW.chain AND a.at >= NEW.at - interval '2 days'
    ORDER BY a.chain_seq DESC LIMIT 1;
    IF tail.at IS NULL OR tail.at < NEW.at - interval '1 day' THEN
        SELECT a.chain_seq, a.hash, a.at INTO tail
        FROM steward_audit a WHERE a.chain = NEW.chain
        ORDER BY a.chain_seq DESC LIMIT 1;
    END IF;
    NEW.chain_seq := coalesce(tail.chain_seq, 0) + 1;
    NEW.prev_hash := coalesce(tail.hash, ''::bytea);
    NEW.hash := steward_audit_hash(NEW.prev_hash, NEW.chain, NEW.chain_seq, NEW.at,
                                   NEW.actor, NEW.tenant, NEW.task_id, NEW.kind, NEW.data);
    RETURN NEW;
END
$function$;

CREATE TRIGGER steward_audit_link BEFORE INSERT ON public.steward_audit FOR EACH ROW EXECUTE FUNCTION steward_audit_link();
