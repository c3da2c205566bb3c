-- Every stream a gateway process relays, at once (runtime/gateway/services.py
-- gateway_recheck): each call's tenant's authz_revision and its task's status, by their
-- primary keys, in one round trip for all of them. Only a call whose revision moved (a
-- grant changed) or whose task is no longer running (a stop closed its admission) is
-- decided again. One statement per RECHECK_SECONDS for the whole process, where one per
-- stream would be a thousand (docs/adr/0031-asgi-gateway.md).
SELECT c.call AS call,
       coalesce(r.revision, 0) AS revision,
       t.status AS status
FROM unnest(%(calls)s::uuid[], %(tenants)s::text[], %(tasks)s::uuid[]) AS c(call, tenant, task)
LEFT JOIN steward_authz_revision r ON r.tenant = c.tenant
LEFT JOIN steward_task t ON t.id = c.task
