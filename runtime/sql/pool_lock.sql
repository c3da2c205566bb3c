-- Serialise admission to one pool for the rest of the transaction.
SELECT name FROM steward_pool WHERE name = %(pool)s FOR UPDATE
