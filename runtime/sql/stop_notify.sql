-- Tell the workers (runtime/worker/) that tasks stopped, or that a tree was paused
-- (runtime/limits/pauses.py); delivered at commit. Each worker then reads the status of
-- the tasks it runs: the payload only says what happened, for a person watching.
SELECT pg_notify('steward_stop', %(payload)s)
