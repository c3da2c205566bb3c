-- Between a stream's chunks (runtime/gateway/services.py gateway_recheck): the tenant's
-- authz_revision and the task's status, two primary-key reads, and whether a live grant
-- of the tenant for the call's action expired since the call was last decided (%(since)s,
-- that decision's time), off grant_live's tenant prefix: a handful of rows. All in one
-- round trip. Only when one of them moved (a grant changed; a stop closed the task's
-- admission; a grant's expiry passed, which moves no revision) is the call decided
-- again. The expiry is read against statement_timestamp(), as authz_decide.sql reads it.
SELECT coalesce((SELECT r.revision FROM steward_authz_revision r WHERE r.tenant = %(tenant)s), 0) AS revision,
       (SELECT t.status FROM steward_task t WHERE t.id = %(task)s) AS status,
       EXISTS (SELECT 1 FROM steward_grant g
               WHERE g.tenant = %(tenant)s AND g.action = %(action)s AND g.revoked_at IS NULL
                 AND g.expires_at > %(since)s AND g.expires_at <= statement_timestamp()) AS expired
