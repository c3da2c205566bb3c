-- Tell the workers (runtime/worker/) which tasks stopped; delivered at commit.
SELECT pg_notify('steward_stop', %(payload)s)
