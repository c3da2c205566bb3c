-- chain, chain_seq, prev_hash, hash and at are set by the steward_audit_link trigger
-- (migration 0007): an insert says only what happened.
INSERT INTO steward_audit (actor, tenant, task_id, kind, data)
VALUES (%(actor)s, %(tenant)s, %(task)s::uuid, %(kind)s, %(data)s::jsonb)
RETURNING id
