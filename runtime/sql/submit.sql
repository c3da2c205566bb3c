SELECT outcome, task_id, status, admitted, max_running, max_queued, wake
FROM steward_submit(%(id)s::uuid, %(agent)s, %(input)s::jsonb, %(digest)s, %(tenant)s, %(owner)s,
                    %(pool)s, %(key)s, %(actor)s, %(audit)s::jsonb, %(parent)s::uuid,
                    %(root)s::uuid, %(spawn_seq)s::integer, %(version)s)
