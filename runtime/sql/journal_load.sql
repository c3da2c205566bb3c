-- Everything a replay needs, in seq order.
SELECT seq, name, kind, output, error FROM steward_step WHERE task_id = %(task)s ORDER BY seq
