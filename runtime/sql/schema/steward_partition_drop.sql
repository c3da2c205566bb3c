CREATE OR REPLACE FUNCTION public.steward_partition_drop(p_table text, p_cutoff timestamp with time zone)
 RETURNS TABLE(partition text, upper_at timestamp with time zone, outcome text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'steward_test_clock', 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    p record;
    v_lo text;
    v_hi text;
BEGIN
    IF p_table NOT IN ('steward_audit', 'steward_decision', 'steward_gateway_call', 'steward_step') THEN
        RAISE EXCEPTION 'not a partitioned table: %', p_table USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR p IN
        SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = p_table::regclass
        ORDER BY c.relname
    LOOP
        v_hi := substring(p.bound FROM $re$TO \('([^']*)'\)$re$);
        CONTINUE WHEN v_hi IS NULL;  -- the default partition
        v_lo := substring(p.bound FROM $re$FROM \('([^']*)'\)$re$);  -- NULL: MINVALUE
        partition := p.name;
        upper_at := CASE WHEN p_table = 'steward_audit' THEN v_hi::timestamptz
                         ELSE steward_uuid7_time(v_hi::uuid) END;
        CONTINUE WHEN upper_at > p_cutoff;
        IF p_table IN ('steward_gateway_call', 'steward_step') AND EXISTS (
            SELECT 1 FROM steward_task t
            WHERE t.id < v_hi::uuid AND (v_lo IS NULL OR t.id >= v_lo::uuid)
              AND (t.status NOT IN ('completed', 'failed', 'cancelled') OR t.finished_at > p_cutoff)
        ) THEN
            outcome := 'live_tasks';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF p_table = 'steward_audit' THEN
            IF NOT EXISTS (SELECT 1 FROM steward_audit_archive a WHERE a.partition = p.name) THEN
                outcome := 'not_archived';
                RETURN NEXT;
                CONTINUE;
            END IF;
            EXECUTE format($sql$
                INSERT INTO steward_audit_boundary (chain, tenant, chain_seq, hash, partition)
                SELECT DISTINCT ON (a.chain) a.chain, a.tenant, a.chain_seq, a.hash, %L FROM %I a
                ORDER BY a.chain, a.chain_seq DESC
                ON CONFLICT (chain) DO UPDATE SET chain_seq = excluded.chain_seq, hash = excluded.hash,
                                                  partition = excluded.partition
                WHERE steward_audit_boundary.chain_seq < excluded.chain_seq$sql$, p.name, p.name);
        END IF;
        BEGIN
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', p_table, p.name);
            EXECUTE format('DROP TABLE %I', p.name);
            outcome := 'dropped';
        EXCEPTION WHEN foreign_key_violation THEN
            outcome := 'referenced';
        END;
        RETURN NEXT;
    END LOOP;
END
$function$;
