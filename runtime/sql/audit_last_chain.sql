-- Where a full `audit verify` stops: the last chain in audit_chain_seq order (one index
-- probe). Rows appended to later chains while it runs are left for the next verify.
SELECT max(chain) AS chain FROM steward_audit
