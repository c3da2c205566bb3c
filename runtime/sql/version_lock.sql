-- An agent version's lock, exclusive, for its retirement (runtime/versions/services.py):
-- steward_submit() takes the same one shared before it checks the version is not
-- retired. The same key in both places: keep them together.
SELECT pg_advisory_xact_lock(hashtextextended('steward_version:' || %(agent)s || ':' || %(version)s, 0))
