-- The schedules whose next tick is due, by the database's clock (never a worker's: two
-- supervisors on skewed hosts must agree on what is due). No lock here: each schedule is
-- fired in its own transaction, which locks its row with SKIP LOCKED and moves the tick
-- on conditionally (runtime/triggers/schedules.py), so a row two supervisors both list
-- is still fired once. A tick held back by overlap `queue` (its previous run is still
-- live) is left out until that run finishes, so a waiting schedule costs no transaction
-- per sweep. Served by the partial index schedule_due.
SELECT s.id, s.next_fire_at
  FROM steward_schedule s
 WHERE NOT s.paused AND s.next_fire_at <= now()
   AND NOT (s.overlap_policy = 'queue' AND EXISTS (
       SELECT 1 FROM steward_task c  -- read only: `c`, the previous run, never moves
        WHERE c.id = s.last_task_id AND c.status NOT IN ('completed', 'failed', 'cancelled')))
 ORDER BY s.next_fire_at
 LIMIT %(limit)s
