-- The kill switch's hold on the set of pools (SHARE: no pool row is inserted, changed or
-- removed until it commits), taken before its hold on every pool row (stop_pools_lock.sql).
-- Without it a submission could create a pool on first use after the rows were locked,
-- lock that new row FOR UPDATE and wait for the switch's lock, while the stop, holding
-- that lock, waited at commit for KEY SHARE on the same row: a deadlock a CI run met
-- (tests/runtime/test_stops.py, the kill switch racing first submissions into a new pool).
-- Row locks (FOR UPDATE, KEY SHARE) take ROW SHARE on the table, which SHARE admits.
LOCK TABLE steward_pool IN SHARE MODE
