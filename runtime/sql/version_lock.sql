-- An agent version's lock, exclusive, for its retirement (runtime/versions/services.py):
-- steward_version_open() (a first claim fixing the version) and steward_submit() take the
-- same one shared before they check the version is not retired. The same key in all
-- three places: keep them together.
SELECT pg_advisory_xact_lock(hashtextextended('steward_version:' || %(agent)s || ':' || %(version)s, 0))
