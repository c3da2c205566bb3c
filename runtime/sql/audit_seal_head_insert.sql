-- A version 2 seal's heads, in the seal's own transaction: one statement for all of them
-- (at most 2 × SEAL_ROWS), in the order of the Merkle tree's leaves.
INSERT INTO steward_audit_seal_head (seal_id, tenant, chain, chain_seq, hash)
SELECT %(seal)s, %(tenant)s, h.chain, h.chain_seq, h.hash
FROM unnest(%(chains)s::text[], %(seqs)s::integer[], %(hashes)s::bytea[]) AS h(chain, chain_seq, hash)
