-- The version of what the console's dashboard shows a tenant (runtime/fleet/selectors.py
-- dashboard_version), in one statement: its live refresh (every 5 s per open dashboard)
-- compares it with the one the browser shows and builds the dashboard only when they
-- differ (console/ui/dashboard.py). A digest of:
--   the current minute: what only time moves (the last hour's window and charts, "ago"
--     texts, the day's finished counts as tasks age out, the database's answer time)
--     refreshes once a minute;
--   the tenant's live tasks by status, and its newest task: a task that finishes leaves
--     a live status, so the day's finished counts move with these unless a new task came
--     in its place, which is then the newest;
--   this minute's finished, failed and step counts (the tenant's, and the fleet's when
--     %(fleet)s: the totals the page shows those who manage the fleet);
--   the processes seen within a day: alive or silent (no beat within %(lease)s seconds),
--     stopped, sweeping lately (within %(sweep_ok)s seconds: health.ok; which of them swept
--     last is as of the last build, at most a minute old), and the live
--     attempts the workers hold, each with whether its lease ran out;
--   each pool's limits, admitted count, held slots and running tasks (as pool_usage.sql);
--   the tenant's unknown effects, pending approvals (and how many expire within
--     %(soon)s seconds), open tree pauses, budget, quotas and tenant-wide token use.
-- Each part reads an index whose size follows live work, not history.
SELECT left(encode(sha256(convert_to(concat_ws('|',
           date_trunc('minute', now()),
           (SELECT string_agg(concat_ws(':', s.status, s.n), ',' ORDER BY s.status)
            FROM (SELECT t.status, count(*) AS n FROM steward_task t
                  WHERE t.tenant = %(tenant)s AND t.status = ANY(%(live)s) GROUP BY t.status) s),
           (SELECT t.id FROM steward_task t WHERE t.tenant = %(tenant)s ORDER BY t.id DESC LIMIT 1),
           (SELECT concat_ws(':', sum(m.finished), sum(m.failed), sum(m.steps)) FROM steward_process_minute m
            WHERE m.tenant = %(tenant)s AND m.minute = date_trunc('minute', now())),
           (SELECT concat_ws(':', sum(m.finished), sum(m.failed), sum(m.steps)) FROM steward_process_minute m
            WHERE %(fleet)s AND m.tenant = '' AND m.minute = date_trunc('minute', now())),
           (SELECT string_agg(concat_ws(':', p.name, p.stopped_at, p.seen_at >= now() - make_interval(secs => %(lease)s),
                                        p.last_sweep_at >= now() - make_interval(secs => %(sweep_ok)s)), ',' ORDER BY p.name)
            FROM steward_process p WHERE p.seen_at >= now() - interval '1 day'),
           (SELECT string_agg(concat_ws(':', a.id, a.worker, a.lease_expires_at < now()), ',' ORDER BY a.id)
            FROM steward_attempt a WHERE a.ended_at IS NULL),
           (SELECT string_agg(concat_ws(':', o.name, o.max_running, o.max_queued,
                                        (SELECT sum(c.admitted) FROM steward_pool_count c WHERE c.pool = o.name),
                                        (SELECT count(*) FROM steward_slot s WHERE s.pool = o.name AND s.task_id IS NOT NULL),
                                        (SELECT count(*) FROM steward_slot s JOIN steward_task t ON t.id = s.task_id
                                         WHERE s.pool = o.name AND t.status = 'running')),
                              ',' ORDER BY o.name)
            FROM steward_pool o),
           (SELECT concat_ws(':', count(*), max(e.id)) FROM steward_effect e
            WHERE e.state = 'unknown' AND e.tenant = %(tenant)s),
           (SELECT concat_ws(':', count(*), max(a.id::text), count(*) FILTER (WHERE a.expires_at <= now() + make_interval(secs => %(soon)s)))
            FROM steward_approval a WHERE a.tenant = %(tenant)s AND a.state = 'pending'),
           (SELECT concat_ws(':', count(*), max(z.id)) FROM steward_tree_pause z
            WHERE z.tenant = %(tenant)s AND z.released_at IS NULL),
           (SELECT concat_ws(':', b.version, b.updated_at) FROM steward_budget b WHERE b.tenant = %(tenant)s),
           (SELECT string_agg(concat_ws(':', q.id, q.calls, q.window_seconds), ',' ORDER BY q.id)
            FROM steward_quota q WHERE q.tenant = %(tenant)s),
           (SELECT sum(u.tokens) FROM steward_token_usage u WHERE u.tenant = %(tenant)s AND u.scope = 'tenant')
       ), 'UTF8')), 'hex'), 16) AS version
