-- A task's epoch and status now: why a journal write of an attempt wrote nothing
-- (runtime/attempts/journal.py), a newer attempt or a stop, or a row already there.
SELECT epoch, status FROM steward_task WHERE id = %(task)s
