-- The version of what the console's live task view shows (runtime/tasks/selectors.py
-- task_live_version), in one statement, prepared: a live poll runs it every 2 s per open
-- page, and built by the ORM it cost more Python than everything else the poll does
-- (13 ms of a 15 ms poll, profiled; the statement itself plans in 0.6 ms and runs in
-- 0.4). A digest of: the task's row; its live attempt (worker, heartbeat, lease, and
-- whether the lease has run out); its last step; its effects, approvals and reruns row
-- by row; its last decision; the end of its audit chain; how many tasks its tree holds
-- and the last change to any; its tree's latest pause; its tenant's authz revision.
-- No row: no such task in the tenant.
SELECT left(encode(sha256(convert_to(concat_ws('|',
           t.status, t.epoch, t.updated_at, t.stop_id,
           (SELECT concat_ws(':', a.epoch, a.worker, a.heartbeat_at, a.lease_expires_at, a.lease_expires_at < now())
            FROM steward_attempt a WHERE a.task_id = t.id AND a.ended_at IS NULL LIMIT 1),
           (SELECT s.seq FROM steward_step s WHERE s.task_id = t.id ORDER BY s.seq DESC LIMIT 1),
           (SELECT string_agg(concat_ws(':', e.id, e.state, e.sends, e.settled_at, e.resolved_by), ',' ORDER BY e.id)
            FROM steward_effect e WHERE e.task_id = t.id),
           (SELECT string_agg(concat_ws(':', p.id, p.state, p.decided_at, p.checked_at), ',' ORDER BY p.id)
            FROM steward_approval p WHERE p.task_id = t.id),
           (SELECT string_agg(concat_ws(':', r.id, r.status), ',' ORDER BY r.id)
            FROM steward_task r WHERE r.rerun_of_id = t.id),
           (SELECT d.id FROM steward_decision d WHERE d.task_id = t.id ORDER BY d.id DESC LIMIT 1),
           (SELECT u.chain_seq FROM steward_audit u
            WHERE u.chain = steward_audit_chain(t.id, t.tenant) ORDER BY u.chain_seq DESC LIMIT 1),
           (SELECT concat_ws(':', count(n.id), max(n.updated_at)) FROM steward_task n
            WHERE n.root_id = coalesce(t.root_id, t.id) AND n.parent_id IS NOT NULL),
           (SELECT concat_ws(':', z.id, z.released_at, z.held) FROM steward_tree_pause z
            WHERE z.root_id = coalesce(t.root_id, t.id) ORDER BY z.id DESC LIMIT 1),
           (SELECT v.revision FROM steward_authz_revision v WHERE v.tenant = t.tenant)
       ), 'UTF8')), 'hex'), 16) AS version
FROM steward_task t
WHERE t.id = %(task)s AND t.tenant = %(tenant)s
