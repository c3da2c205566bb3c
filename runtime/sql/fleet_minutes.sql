-- The last %(minutes)s minutes, summed over processes, one row per minute
-- (generate_series: a quiet minute is a zero, not a gap in a chart), of %(tenant)s: a
-- tenant's own rows, or the whole fleet's ('', fleet.services.FLEET). Each process writes
-- a fleet row and a row per tenant it served (process_beat.sql), so either reads at most
-- one row per process and minute, off an index (process_minute_once, whose tenant the
-- scan checks; process_minute_tenant once many tenants share each minute).
WITH span AS (
    SELECT generate_series(date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1),
                           date_trunc('minute', now()), interval '1 minute') AS minute
), summed AS (
    SELECT m.minute, sum(m.finished) AS finished, sum(m.failed) AS failed, sum(m.steps) AS steps,
           (SELECT array_agg(total ORDER BY i) FROM (
                SELECT i, sum(w) AS total FROM steward_process_minute m2, unnest(m2.waits) WITH ORDINALITY AS t(w, i)
                WHERE m2.tenant = %(tenant)s AND m2.minute = m.minute GROUP BY i) per_bucket) AS waits
    FROM steward_process_minute m
    WHERE m.tenant = %(tenant)s
      AND m.minute >= date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1)
    GROUP BY m.minute
)
SELECT span.minute, coalesce(finished, 0)::integer AS finished, coalesce(failed, 0)::integer AS failed,
       coalesce(steps, 0)::integer AS steps, waits::integer[] AS waits
FROM span LEFT JOIN summed USING (minute)
ORDER BY span.minute
