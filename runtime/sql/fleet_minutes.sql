-- The last %(minutes)s minutes, summed over processes, one row per minute
-- (generate_series: a quiet minute is a zero, not a gap in a chart): the fleet's, over
-- every tenant's rows, when %(tenant)s is NULL; else that tenant's own
-- (process_minute_tenant). Each process writes a row per minute and tenant it served
-- (process_beat.sql), so an hour is a few hundred rows, whatever the volume.
WITH span AS (
    SELECT generate_series(date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1),
                           date_trunc('minute', now()), interval '1 minute') AS minute
), rows AS (
    SELECT * FROM steward_process_minute m
    WHERE m.minute >= date_trunc('minute', now()) - make_interval(mins => %(minutes)s - 1)
      AND (%(tenant)s::text IS NULL OR m.tenant = %(tenant)s::text)
), summed AS (
    SELECT m.minute, sum(m.finished) AS finished, sum(m.failed) AS failed, sum(m.steps) AS steps,
           (SELECT array_agg(total ORDER BY i) FROM (
                SELECT i, sum(w) AS total FROM rows m2, unnest(m2.waits) WITH ORDINALITY AS t(w, i)
                WHERE m2.minute = m.minute GROUP BY i) per_bucket) AS waits
    FROM rows m
    GROUP BY m.minute
)
SELECT span.minute, coalesce(finished, 0)::integer AS finished, coalesce(failed, 0)::integer AS failed,
       coalesce(steps, 0)::integer AS steps, waits::integer[] AS waits
FROM span LEFT JOIN summed USING (minute)
ORDER BY span.minute
