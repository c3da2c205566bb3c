-- The schedules whose next tick is due, by the database's clock (never a worker's: two
-- supervisors on skewed hosts must agree on what is due). No lock here: each schedule is
-- fired in its own transaction, which locks its row with SKIP LOCKED and moves the tick
-- on conditionally (runtime/triggers/schedules.py), so a row two supervisors both list
-- is still fired once. Served by the partial index schedule_due.
SELECT id, next_fire_at
  FROM steward_schedule
 WHERE NOT paused AND next_fire_at <= now()
 ORDER BY next_fire_at
 LIMIT %(limit)s
