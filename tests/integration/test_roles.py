"""The two roles docs/deploy.md prescribes, as the embedded PostgreSQL sets them up
(console/dev/services.py database_prepare, runtime/roles.py), on a private server of the
test's own: roles are cluster-wide, and the session's server is shared.

The deployment below starts as an install from before the roles (migrated by the
superuser, up to 0020), then is prepared and migrated on as `steward_owner`, as
`make run` does. The application role, `steward_app`, then reads and writes rows through
the CLI, and cannot TRUNCATE, switch a trigger off or skip one; the owner's TRUNCATE is
refused by the guards; every table, those of migrations run after the roles included,
carries exactly the application's profile.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import psycopg
import pytest

from console.dev.services import database_prepare
from runtime import roles
from tests.faults.services import PrivatePostgres, manage
from tests.harness import at_once

pytestmark = [pytest.mark.integration]

GUARDED = [
    "steward_audit",
    "steward_audit_seal",
    "steward_decision",
    "steward_stop_ack",
    "steward_gateway_call",
    "steward_grant",
]
APP = roles.ROLE_NAMES["web"]
WORKER = roles.ROLE_NAMES["worker"]


@pytest.fixture(scope="module")
def server():
    pg = PrivatePostgres().start()  # database `steward`, made by the superuser
    try:
        yield pg
    finally:
        pg.stop()


def _env(child_env: dict, urls: dict) -> dict:
    # The worker role's address is the deployment's, or none (child_env's names the session's server).
    child_env = {k: v for k, v in child_env.items() if k != "STEWARD_WORKER_DATABASE_URL"}
    return {
        **child_env,
        **(
            {"STEWARD_WORKER_DATABASE_URL": urls["STEWARD_WORKER_DATABASE_URL"]}
            if "STEWARD_WORKER_DATABASE_URL" in urls
            else {}
        ),
        "DATABASE_URL": urls["DATABASE_URL"],
        "STEWARD_DB_STATEMENT_TIMEOUT": "0",  # a CREATE INDEX on a loaded machine (PrivatePostgres.migrate)
        "STEWARD_DB_IDLE_IN_TRANSACTION_TIMEOUT": "0",
        **({"STEWARD_MIGRATE_DATABASE_URL": urls["owner"]} if "owner" in urls else {}),
    }


@pytest.fixture(scope="module")
def deployment(server, child_env) -> dict:
    """An install from before the roles, prepared and migrated on as the owner."""
    manage(["migrate", "runtime", "0020", "--noinput", "-v0"], _env(child_env, {"DATABASE_URL": server.url}))
    urls = database_prepare(server.server, "steward")
    urls["owner"] = urls.pop("STEWARD_MIGRATE_DATABASE_URL")
    out = manage(["migrate", "--noinput"], _env(child_env, urls))
    assert "Applying runtime.0021_tree_pause... OK" in out and "Applying runtime.0022_truncate_guards... OK" in out
    assert f"Granted the application's privileges to {APP}, {WORKER}" in out
    return urls


def connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def refusal(conn: psycopg.Connection, sql: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as caught, conn.transaction():
        conn.execute(sql)
    return caught.value


def test_the_embedded_database_is_the_owners_and_the_application_role_is_nobody_special(deployment):
    with connect(deployment["superuser"]) as conn:
        owner = conn.execute("SELECT datdba::regrole::text FROM pg_database WHERE datname = 'steward'").fetchone()
        assert owner == (roles.OWNER,)
        flags = conn.execute(
            "SELECT rolname, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles "
            "WHERE rolname = ANY(%s) ORDER BY 1",
            [[roles.OWNER, APP, WORKER]],
        ).fetchall()
        assert flags == [
            (APP, False, False, False, False, False),
            (roles.OWNER, False, False, False, False, False),
            (WORKER, False, False, False, False, False),
        ]
        # Everything, the superuser's tables of before included, is the owner's now.
        others = conn.execute(
            "SELECT relname, relowner::regrole::text FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "AND relowner <> 'steward_owner'::regrole UNION ALL SELECT proname, proowner::regrole::text FROM pg_proc "
            "WHERE pronamespace = 'public'::regnamespace AND proowner <> 'steward_owner'::regrole"
        ).fetchall()
        assert others == []


@pytest.mark.parametrize("table", GUARDED)
def test_the_application_role_cannot_truncate_switch_a_trigger_off_or_skip_one(deployment, table):
    with connect(deployment["DATABASE_URL"]) as app:
        assert app.execute("SELECT current_user").fetchone() == (APP,)
        for sql, says in [
            (f"TRUNCATE {table}", f"permission denied for table {table}"),
            (f"TRUNCATE {table} CASCADE", f"permission denied for table {table}"),
            (f"ALTER TABLE {table} DISABLE TRIGGER ALL", f"must be owner of table {table}"),
            (f"ALTER TABLE {table} DISABLE TRIGGER USER", f"must be owner of table {table}"),
            (f"ALTER TABLE {table} OWNER TO {APP}", f"must be owner of table {table}"),
            (f"DROP TABLE {table}", f"must be owner of table {table}"),
            ("SET session_replication_role = replica", 'permission denied to set parameter "session_replication_role"'),
            ("SET LOCAL session_replication_role = replica", "permission denied to set parameter"),
            ("SELECT set_config('session_replication_role', 'replica', false)", "permission denied to set parameter"),
            (f"CREATE TABLE {table}_copy (id bigint)", "permission denied for schema public"),
        ]:
            error = refusal(app, sql)
            assert error.sqlstate == "42501", (sql, error)  # insufficient_privilege
            assert says in str(error), (sql, error)


def test_the_owner_cannot_truncate_either_but_only_it_can_switch_the_guards_off(deployment):
    """What the owner alone still can do, ALTER TABLE ... DISABLE TRIGGER, is what the
    seals name (tests/runtime/test_seals.py); it is why the application is not the owner."""
    with connect(deployment["owner"]) as owner:
        for table in GUARDED:
            assert "TRUNCATE is never allowed" in str(refusal(owner, f"TRUNCATE {table} CASCADE")), table
        with owner.transaction():
            owner.execute("ALTER TABLE steward_audit DISABLE TRIGGER steward_audit_no_truncate")
            # Each partition carries its own guard (migration 0032: a TRUNCATE of the parent
            # reaches them), and only the owner can switch those off too.
            partitions = owner.execute(
                "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'steward_audit'::regclass"
            ).fetchall()
            for (partition,) in partitions:
                owner.execute(f'ALTER TABLE {partition} DISABLE TRIGGER "{partition}_no_truncate"')
            owner.execute("TRUNCATE steward_audit")
            raise psycopg.Rollback()  # the trail stays: this only shows the owner could


@pytest.mark.parametrize("profile", ["web", "worker"])
def test_every_table_carries_exactly_the_applications_profile(deployment, profile):
    """Those a migration made after the roles existed (0021's steward_tree_pause) too: the
    grant runs after every migrate, nothing is granted by default. The worker's column
    grants (steward_approval's) are not table privileges, and do not show here."""
    role, granted = roles.ROLE_NAMES[profile], roles.PROFILES[profile]
    with connect(deployment["owner"]) as owner:
        rows = owner.execute(
            "SELECT c.relname, p.privilege, has_table_privilege(%s, c.oid, p.privilege) "
            "FROM pg_class c, unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', "
            "'TRIGGER']) AS p(privilege) WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')",
            [role],
        ).fetchall()
    tables = {table for table, _, _ in rows}
    assert {"steward_tree_pause", "steward_task", "steward_audit", "auth_user", "django_migrations"} <= tables
    wrong = [(t, p, has) for t, p, has in rows if has != (p in granted.only.get(t, granted.tables))]
    assert wrong == []


def test_the_application_role_runs_steward_through_the_cli(deployment, child_env):
    env = _env(child_env, {"DATABASE_URL": deployment["DATABASE_URL"]})
    manage(["steward", "pool-create", "research", "--max-running", "2", "--max-queued", "10"], env)
    assert "research" in manage(["steward", "pools"], env)
    manage(["steward", "audit", "verify"], env)
    with connect(deployment["DATABASE_URL"]) as app:
        assert app.execute("SELECT count(*) FROM steward_audit WHERE kind = 'pool.created'").fetchone() == (1,)


def test_a_second_migrate_changes_nothing_and_grants_again(deployment, child_env):
    out = manage(["migrate", "--noinput"], _env(child_env, deployment))
    assert "No migrations to apply." in out and f"Granted the application's privileges to {APP}, {WORKER}" in out


def test_the_processes_a_test_starts_connect_as_the_application_role(db, child_env):
    """tests/conftest.py: the session may be a superuser (STEWARD_TEST_DATABASE_URL, on the
    embedded server); the workers, web servers and CLI it starts are the application."""
    probe = (
        "from django.db import connection; cur = connection.cursor(); "
        "cur.execute('SELECT current_user, current_database(), current_setting(%s)', ['is_superuser']); "
        "print(*cur.fetchone())"
    )
    user, database, superuser = manage(["shell", "-c", probe], child_env).splitlines()[-1].split()
    assert user == urlsplit(child_env["DATABASE_URL"]).username
    assert database.startswith("test_")
    assert "STEWARD_MIGRATE_DATABASE_URL" not in child_env and "STEWARD_TEST_DATABASE_URL" not in child_env
    if os.environ.get("STEWARD_TEST_DATABASE_URL"):  # the embedded server: the documented roles
        assert (user, superuser) == (APP, "off")
        # Workers, supervisors and beat get the worker role's address for the same database.
        worker = urlsplit(child_env["STEWARD_WORKER_DATABASE_URL"])
        assert (worker.username, worker.path) == (WORKER, urlsplit(child_env["DATABASE_URL"]).path)


# --- at once ----------------------------------------------------------------------------------

THREADS = 8
TRIALS = 10


def test_many_processes_ensuring_one_role_at_once_all_succeed(server):
    """role_ensure alone, without database_prepare's lock: the race is CREATE ROLE's own
    (duplicate_object, or unique_violation on the catalog's index) and, in every other
    trial, the ALTER of a role someone made a superuser by hand ("tuple concurrently
    updated" when two ALTER it at once)."""
    outcomes = []
    for trial in range(TRIALS):
        name = f"steward_race_{trial}"
        with connect(server.server.get_uri()) as conn:
            if trial % 2:
                conn.execute(f"CREATE ROLE {name} SUPERUSER NOLOGIN")
        connections = [connect(server.server.get_uri()) for _ in range(THREADS)]
        try:
            outcomes += at_once(THREADS, lambda i: roles.role_ensure(connections[i].cursor(), name))
            with connect(server.server.get_uri()) as conn:
                found = conn.execute("SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = %s", [name])
                assert found.fetchall() == [(True, False)], trial
                conn.execute(f"DROP ROLE {name}")
        finally:
            for conn in connections:
                conn.close()
    assert [o for o in outcomes if o is not None] == []
    assert len(outcomes) == THREADS * TRIALS


def test_many_wrappers_preparing_a_fresh_server_at_once_agree():
    """`make run` and `make test` started together on a fresh install: every wrapper gets
    the same URLs, the roles and the database exist once."""
    urls = []
    for _ in range(TRIALS // 2):
        pg = PrivatePostgres().start()
        try:
            results = at_once(THREADS, lambda i: database_prepare(pg.server, "fresh"))
            assert [r for r in results if isinstance(r, Exception)] == []
            assert len({tuple(sorted(r.items())) for r in results}) == 1
            urls.append(results[0])
            with connect(pg.server.get_uri()) as conn:
                owner = conn.execute("SELECT datdba::regrole::text FROM pg_database WHERE datname = 'fresh'")
                assert owner.fetchone() == (roles.OWNER,)
        finally:
            pg.stop()
    assert len(urls) == TRIALS // 2
