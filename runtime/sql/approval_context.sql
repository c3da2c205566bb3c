-- What an approval's context digest covers that the database holds
-- (runtime/approvals/package.py): the task's input digest and its tenant's authz_revision
-- (0 before the tenant's first grant change), in one round trip where there were two.
WITH context AS (
    SELECT t.id, t.input_digest,
           coalesce((SELECT r.revision FROM steward_authz_revision r WHERE r.tenant = t.tenant), 0)
               AS authz_revision
    FROM steward_task t
    WHERE t.id = %(task)s
)
-- result:
SELECT input_digest, authz_revision FROM context
