-- chain_seq, prev_hash, hash and at are filled by the steward_audit_link trigger.
INSERT INTO steward_audit (chain, actor, tenant, task_id, kind, data)
VALUES (%(chain)s, %(actor)s, %(tenant)s, %(task)s::uuid, %(kind)s, %(data)s::jsonb)
RETURNING id
