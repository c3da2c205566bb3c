-- The version 2 seals that name a head among an audit partition's rows, for its archive
-- (runtime/lifecycle/archive.py): each row of the range probes the seal heads of its
-- chain (audit_seal_head_chain).
SELECT DISTINCT h.seal_id
FROM steward_audit a
JOIN steward_audit_seal_head h ON h.tenant = a.tenant AND h.chain = a.chain AND h.chain_seq = a.chain_seq
WHERE a.at >= coalesce(%(lower)s::timestamptz, '-infinity') AND a.at < %(upper)s::timestamptz
ORDER BY h.seal_id
