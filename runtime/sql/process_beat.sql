-- A process's heartbeat: it is alive (seen_at, the database's clock), its totals since it
-- started, and what it did since its last beat added to this minute's row. One statement,
-- so a beat is one round trip whatever it reports.
WITH beat AS (
    INSERT INTO steward_process (name, kind, host, pid, queue, started_at, seen_at, counters, last_sweep_at)
    VALUES (%(name)s, %(kind)s, %(host)s, %(pid)s, %(queue)s, now(), now(), %(counters)s::jsonb,
            CASE WHEN %(swept)s::boolean THEN now() END)
    ON CONFLICT (name) DO UPDATE
    SET seen_at = now(), stopped_at = NULL, counters = EXCLUDED.counters,
        last_sweep_at = coalesce(EXCLUDED.last_sweep_at, steward_process.last_sweep_at)
    RETURNING name
)
INSERT INTO steward_process_minute AS m (minute, process, finished, failed, steps, waits)
SELECT date_trunc('minute', now()), %(name)s, %(finished)s, %(failed)s, %(steps)s, %(waits)s::integer[]
FROM beat
WHERE %(active)s::boolean
ON CONFLICT (minute, process) DO UPDATE
SET finished = m.finished + EXCLUDED.finished,
    failed = m.failed + EXCLUDED.failed,
    steps = m.steps + EXCLUDED.steps,
    waits = (SELECT array_agg(coalesce(a, 0) + coalesce(b, 0) ORDER BY i)
             FROM unnest(m.waits, EXCLUDED.waits) WITH ORDINALITY AS t(a, b, i))
