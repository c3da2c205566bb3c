-- A process's heartbeat: it is alive (seen_at, the database's clock), its totals since it
-- started, and what it did since its last beat added to this minute's rows. One statement,
-- so a beat is one round trip whatever it reports.
WITH beat AS (
    INSERT INTO steward_process (name, kind, host, pid, queue, started_at, seen_at, counters, last_sweep_at,
                                 versions)
    VALUES (%(name)s, %(kind)s, %(host)s, %(pid)s, %(queue)s, now(), now(), %(counters)s::jsonb,
            CASE WHEN %(swept)s::boolean THEN now() END, %(versions)s::jsonb)
    ON CONFLICT (name) DO UPDATE
    SET seen_at = now(), stopped_at = NULL, counters = EXCLUDED.counters, versions = EXCLUDED.versions,
        last_sweep_at = coalesce(EXCLUDED.last_sweep_at, steward_process.last_sweep_at)
    RETURNING name
)
-- One minute row per tenant whose tasks it ran (%(minutes)s, a JSON list; none when idle):
-- the fleet's minute is their sum, a tenant's is its own (runtime/fleet/selectors.py).
INSERT INTO steward_process_minute AS m (minute, process, tenant, finished, failed, steps, waits)
SELECT date_trunc('minute', now()), %(name)s, t.tenant, t.finished, t.failed, t.steps,
       (SELECT array_agg(w::integer ORDER BY i) FROM jsonb_array_elements_text(t.waits) WITH ORDINALITY AS x(w, i))
FROM beat, jsonb_to_recordset(%(minutes)s::jsonb) AS t(tenant text, finished integer, failed integer, steps integer, waits jsonb)
ON CONFLICT (minute, process, tenant) DO UPDATE
SET finished = m.finished + EXCLUDED.finished,
    failed = m.failed + EXCLUDED.failed,
    steps = m.steps + EXCLUDED.steps,
    waits = (SELECT array_agg(coalesce(a, 0) + coalesce(b, 0) ORDER BY i)
             FROM unnest(m.waits, EXCLUDED.waits) WITH ORDINALITY AS t(a, b, i))
