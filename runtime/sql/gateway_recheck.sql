-- Between a stream's chunks (runtime/gateway/services.py gateway_recheck): the tenant's
-- authz_revision and the task's status, two primary-key reads in one round trip. Only
-- when either moved (a grant changed; a stop closed the task's admission) is the call
-- decided again.
SELECT coalesce((SELECT r.revision FROM steward_authz_revision r WHERE r.tenant = %(tenant)s), 0) AS revision,
       (SELECT t.status FROM steward_task t WHERE t.id = %(task)s) AS status
