-- Take a task's row lock for the rest of the transaction (parent-before-child order).
SELECT status FROM steward_task WHERE id = %(task)s FOR UPDATE
