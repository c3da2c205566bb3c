CREATE OR REPLACE FUNCTION public.steward_partitions_ensure(p_through timestamp with time zone)
 RETURNS SETOF text
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'steward_test_clock', 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_table text;
    v_day timestamptz;
    v_name text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['steward_audit', 'steward_decision', 'steward_gateway_call', 'steward_step'] LOOP
        v_day := date_trunc('day', now(), 'UTC');
        WHILE v_day <= p_through LOOP
            v_name := v_table || '_p' || to_char(v_day AT TIME ZONE 'UTC', 'YYYYMMDD');
            IF to_regclass(v_name) IS NULL THEN
                BEGIN
                    IF v_table = 'steward_audit' THEN
                        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                                       v_name, v_table, v_day, v_day + interval '1 day');
                    ELSE
                        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                                       v_name, v_table, steward_uuid7_floor(v_day),
                                       steward_uuid7_floor(v_day + interval '1 day'));
                    END IF;
                    IF v_table <> 'steward_step' THEN
                        PERFORM steward_partition_guard(v_name);
                    END IF;
                    RETURN NEXT v_name;
                EXCEPTION WHEN check_violation OR invalid_object_definition THEN
                    RAISE WARNING 'partition % not created: %', v_name, SQLERRM;
                END;
            END IF;
            v_day := v_day + interval '1 day';
        END LOOP;
    END LOOP;
END
$function$;
