-- Bump a tenant's authz_revision by one and return the new value (grant_create, _narrow,
-- _revoke, on their own transaction). Two changes racing: ON CONFLICT DO UPDATE takes
-- the row lock, so the second waits for the first to commit and then adds one to the
-- committed value; no two changes share a revision and the order of revisions is the
-- order of commits. The first change of a tenant inserts revision 1; two first changes
-- racing meet on the primary key, and the loser takes the update branch.
INSERT INTO steward_authz_revision (tenant, revision, updated_at)
VALUES (%(tenant)s, 1, now())
ON CONFLICT (tenant) DO UPDATE
SET revision = steward_authz_revision.revision + 1, updated_at = now()
RETURNING revision
