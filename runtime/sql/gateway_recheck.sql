-- Every stream a gateway process relays, at once (runtime/gateway/services.py
-- gateway_recheck): each call's tenant's authz_revision and its task's status, by their
-- primary keys, and whether a live grant of the tenant for the call's action expired since
-- the call was last decided (its `since`), off grant_live's tenant prefix: a handful of
-- rows. One round trip for all of them. Only a call whose revision moved (a grant
-- changed), whose task is no longer running (a stop closed its admission) or whose grant
-- expired (which moves no revision) is decided again. The expiry is read against
-- statement_timestamp(), as authz_decide.sql reads it. One statement per RECHECK_SECONDS
-- for the whole process, where one per stream would be a thousand
-- (docs/adr/0031-asgi-gateway.md).
SELECT c.call AS call,
       coalesce(r.revision, 0) AS revision,
       t.status AS status,
       EXISTS (SELECT 1 FROM steward_grant g
               WHERE g.tenant = c.tenant AND g.action = c.action AND g.revoked_at IS NULL
                 AND g.expires_at > c.since AND g.expires_at <= statement_timestamp()) AS expired
FROM unnest(%(calls)s::uuid[], %(tenants)s::text[], %(tasks)s::uuid[], %(actions)s::text[],
            %(since)s::timestamptz[]) AS c(call, tenant, task, action, since)
LEFT JOIN steward_authz_revision r ON r.tenant = c.tenant
LEFT JOIN steward_task t ON t.id = c.task
