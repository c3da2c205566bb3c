-- The first statement of a call's end (gateway_call_finish.sql): its task's status and
-- stop, the row read FOR KEY SHARE, which orders the end against a stop's FOR UPDATE of
-- the tree. A stop that committed first is seen here (the row's latest version, after
-- the wait), and the end's finished_at then comes after the stop's request; a stop that
-- comes later waits for this transaction and finds the call ended (runtime/stops/
-- services.py _locked_tree). Either way one of the two acknowledges for the gateway.
SELECT t.status, t.stop_id
FROM steward_task t
WHERE t.id = (SELECT c.task_id FROM steward_gateway_call c WHERE c.id = %(id)s)
FOR KEY SHARE
