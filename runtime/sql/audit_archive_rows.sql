-- The next %(limit)s rows of an audit partition after (%(chain)s, %(seq)s), for its archive
-- (runtime/lifecycle/archive.py), in (chain, chain_seq) order off audit_chain_seq, read
-- through the parent (the range prunes to the one partition): a day's partition is never
-- held whole. `data` as PostgreSQL prints it and `at_us` as steward_audit_hash()
-- computes it: exactly what the hash covers.
SELECT id, chain, chain_seq, at, (extract(epoch FROM at) * 1000000)::bigint AS at_us, actor, tenant, task_id,
       kind, data::text AS data, prev_hash, hash
FROM steward_audit
WHERE at >= coalesce(%(lower)s::timestamptz, '-infinity') AND at < %(upper)s::timestamptz
  AND (chain, chain_seq) > (%(chain)s::text, %(seq)s::integer)
ORDER BY chain, chain_seq
LIMIT %(limit)s
