-- The trees a stop covers, locked top-down (parents first: the order every writer
-- uses), with what each boundary needs to know of every live task in them: its status,
-- epoch and timer, whether an attempt of it is still open (the worker must answer) and
-- whether the gateway is carrying a call of it (the gateway must answer).
-- A root may also be a descendant of another root (the kill switch's roots are every
-- live task of an agent, and a task of it may spawn one of it): each task comes out
-- once, at its deepest place, so a parent still comes before each of its children.
WITH RECURSIVE tree AS (
    SELECT id, 0 AS depth FROM steward_task WHERE id = ANY (%(roots)s::uuid[])
    UNION
    SELECT c.id, tree.depth + 1 FROM steward_task c JOIN tree ON c.parent_id = tree.id
), once AS (
    SELECT id, max(depth) AS depth FROM tree GROUP BY id
), locked AS (
    SELECT t.id, t.parent_id, t.status, t.epoch, t.wake_at, t.waiting_on, once.depth
    FROM steward_task t JOIN once USING (id)
    ORDER BY once.depth, t.id
    FOR UPDATE OF t
)
SELECT l.id, l.parent_id, l.status, l.epoch, l.wake_at, coalesce(cardinality(l.waiting_on), 0) AS waiting_on,
       l.depth, EXISTS (SELECT 1 FROM steward_attempt a WHERE a.task_id = l.id AND a.ended_at IS NULL) AS attempt_open,
       ARRAY(SELECT c.id::text FROM steward_gateway_call c
             WHERE c.task_id = l.id AND c.outcome = 'admitted'
               AND c.started_at > statement_timestamp() - make_interval(secs => %(in_flight)s::float8)) AS calls
FROM locked l
WHERE l.status IN ('blocked', 'dead', 'queued', 'running', 'sleeping', 'waiting')
ORDER BY l.depth, l.id
