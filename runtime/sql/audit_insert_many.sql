-- Several events in one round trip, each filed in its own chain by the link trigger as
-- audit_insert.sql's one is (a stop's `task.stopping` rows, one per task of the tree:
-- fifty statements were most of a 50-task stop's time on a loaded machine). The arrays
-- are parallel, one element an event.
INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
SELECT e.actor, e.tenant, e.task_id, e.kind, e.data
FROM unnest(%(actors)s::text[], %(tenants)s::text[], %(tasks)s::uuid[], %(kinds)s::text[], %(datas)s::jsonb[])
     AS e(actor, tenant, task_id, kind, data)
