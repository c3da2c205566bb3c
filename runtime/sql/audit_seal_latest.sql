-- What the next seal of a tenant continues from (runtime/trail/seals.py): its latest
-- seal's seq, MAC, time, version and the position its scan reached. Never its heads.
SELECT s.seq, s.mac, s.sealed_at, s.version, s.through_at, s.through_id
FROM steward_audit_seal s WHERE s.tenant = %(tenant)s ORDER BY s.seq DESC LIMIT 1
