-- What the stop watcher (runtime/worker/stop_watch.py) reads of the tasks its process
-- runs, on each notification: whether a stop reached them, and whether their tree is
-- paused (runtime/limits/pauses.py).
SELECT t.id, t.epoch, t.status,
       EXISTS (SELECT 1 FROM steward_tree_pause p WHERE p.root_id = t.root_id AND p.released_at IS NULL) AS paused
FROM steward_task t
WHERE t.id = ANY(%(tasks)s)
