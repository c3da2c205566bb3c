-- The kill switch's hold on every pool row (KEY SHARE, in name order), taken before the
-- switch's own lock. A submission locks its pool row FOR UPDATE and only then, from
-- the insert's trigger, the switch's lock shared (steward_submit, migration 0014); the
-- stop updates each task it cancels twice in its transaction, so at commit PostgreSQL
-- checks the task's deferred foreign key to its pool, which takes KEY SHARE on that
-- pool row. Holding the switch's lock while waiting for it deadlocked with a submitter
-- waiting for the switch's lock while holding its pool (tests/runtime/test_stops.py).
SELECT name FROM steward_pool ORDER BY name FOR KEY SHARE
