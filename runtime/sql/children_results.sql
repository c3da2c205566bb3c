-- What ctx.wait() reads of the children it waits for (runtime/tasks/children.py), under
-- the parent's exclusive fence: only this task's children, so a stranger's id finds nothing.
SELECT id, status, output, error FROM steward_task WHERE id = ANY (%(ids)s::uuid[]) AND parent_id = %(parent)s
