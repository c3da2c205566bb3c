-- Serialize the spawns of one tree (runtime/limits/breakers.py spawn_admit): held until
-- the spawn's transaction commits or rolls back, so the next spawner of the tree counts
-- this one's child. The two-key form keeps it apart from the one-key advisory locks
-- of the audit chains and the kill switch (migrations 0007 and 0014).
-- Its own statement, before spawn_breakers.sql: at READ COMMITTED a statement's snapshot
-- is taken when it starts, so a count in this statement would not see the child of the
-- spawner we waited for (tests/runtime/test_breakers_race.py catches exactly that).
SELECT pg_advisory_xact_lock(hashtext('steward.spawn'), hashtext(%(root)s::text))
