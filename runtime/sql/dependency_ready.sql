-- The waiting dependency triggers their prerequisites now decide: every prerequisite
-- finished, or (unless on_failure is `run`, which waits for all of them) one failed or
-- was cancelled. One statement per sweep however many triggers wait, so a trigger whose
-- prerequisites are still running costs no transaction; each one listed is settled in its
-- own transaction under SKIP LOCKED and a conditional UPDATE (runtime/triggers/dependencies.py).
-- Read only: `c` is the tasks it reads (the prerequisites), never moves.
SELECT d.id
  FROM steward_dependency_trigger d
 WHERE d.state = 'waiting'
   AND (NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(d.prerequisites) AS p(id)
                      JOIN steward_task c ON c.id = p.id::uuid
                     WHERE c.status NOT IN ('completed', 'failed', 'cancelled'))
        OR (d.on_failure <> 'run' AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(d.prerequisites) AS p(id)
                                                JOIN steward_task c ON c.id = p.id::uuid
                                               WHERE c.status IN ('completed', 'failed', 'cancelled')
                                                 AND c.status <> 'completed')))
 ORDER BY d.created_at
 LIMIT %(limit)s
