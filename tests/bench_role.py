"""The benches' database role. A bench creates databases of its own and runs every process
in them as one role, one that may create databases: under `make bench` on the embedded
server, its superuser (STEWARD_TEST_DATABASE_URL, from console/dev/services.py --tests).
Roles are not what the benches measure; tests/integration/test_roles.py tests them.

Imported for its effect, first, by tests/bench.py and tests/bench_scale.py (and through
them by every bench), before anything reads DATABASE_URL."""

from __future__ import annotations

import os

if os.environ.get("STEWARD_TEST_DATABASE_URL"):
    os.environ["DATABASE_URL"] = os.environ.pop("STEWARD_TEST_DATABASE_URL")
# A bench migrates the databases it makes as the role that made them, never the owner's
# database that STEWARD_MIGRATE_DATABASE_URL names.
os.environ.pop("STEWARD_MIGRATE_DATABASE_URL", None)
