"""Shared fixtures. Every test runs against real PostgreSQL (never SQLite); integration
tests also start real Celery worker and supervisor processes against real Redis.

Timing knobs are shortened here, for this process and for every child process alike,
so a killed worker's lease expires in about two seconds instead of thirty.

Two database roles, as in a deployment (runtime/roles.py). The test session connects as
STEWARD_TEST_DATABASE_URL's role when it is set (`make test` on the embedded server sets
it to the server's superuser): it creates and drops the test database, migrates it, and
tampers with it as a superuser would. Every process a test starts (workers, supervisors,
web servers, the CLI) connects as DATABASE_URL's role, which on the embedded server is the
application role: `migrate` granted it its profile in the test database, and it owns
nothing there. Without STEWARD_TEST_DATABASE_URL both are DATABASE_URL's role.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.test import TransactionTestCase

import tests.agents  # noqa: F401 - registers the test agents in this process
from console import env as console_env
from console.dev.demo.fake_service import FakeService
from runtime.attempts.lease import keeper
from runtime.models import Attempt
from runtime.testing import install_clock
from tests.counts import count_drift
from tests.fresh import Baseline, full_flush
from tests.harness import Fleet, WarmFleet, wait_until
from tests.tamper import TRUNCATE_GUARDS, triggers_off

TIMING = {
    "STEWARD_LEASE_SECONDS": "2",
    "STEWARD_HEARTBEAT_SECONDS": "0.3",
    "STEWARD_SWEEP_SECONDS": "0.2",
    "STEWARD_REDISPATCH_SECONDS": "1",
    "STEWARD_MAX_CRASHES": "5",
}
# One queue per test session: a `make run` on the same Redis never sees our messages.
QUEUE = f"steward-test-{uuid.uuid4().hex[:8]}"
# How child processes reach the server: DATABASE_URL's role, host and port, kept here
# before the session takes STEWARD_TEST_DATABASE_URL's (django_db_modify_db_settings).
CONNECT_AS = ("USER", "PASSWORD", "HOST", "PORT")
CHILDREN_CONNECT_AS: dict[str, str] = {}


def pytest_itemcollected(item):
    """What a test starts, it starts with child_env (workers, supervisors, the web server,
    manage.py): mark it `process`, before `-m` selects, and `make check` leaves it to
    `make test`. A test that starts one otherwise says so itself."""
    if item.get_closest_marker("integration") or "child_env" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.process)


@pytest.hookimpl(trylast=True)  # after tests/e2e/conftest.py has marked its journeys
def pytest_collection_modifyitems(items):
    """The modules that start real processes first, each module's tests kept together.

    `make test` hands whole modules to its pytest-xdist workers in this order
    (--dist loadfile --no-loadscope-reorder): the long modules start early, and the many
    short ones fill in behind them, so neither worker is left alone with a long module
    at the end. In one process the order changes nothing a test may rely on.

    Every test also gets an id of its own: Schemathesis names each route's test in
    tests/api/test_fuzz.py alike, and xdist's scheduler keys a module's tests by id, so it
    ran one of the 68 and dropped the rest without a word. Its route tells them apart."""
    starts_processes = {item.module.__name__ for item in items if item.get_closest_marker("integration")}
    items.sort(key=lambda item: item.module.__name__ not in starts_processes)
    ids = Counter(item.nodeid for item in items)
    for item in items:
        if ids[item.nodeid] > 1:
            item._id = item._id.with_params(getattr(item, "operation_label", None) or item.name)  # pytest 9's NodeId
    repeated = [nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1]
    if repeated:
        raise pytest.UsageError(f"tests that share an id would be run once under xdist: {repeated}")


@pytest.fixture(scope="session", autouse=True)
def steward_timing():
    settings.STEWARD.update(
        LEASE_SECONDS=float(TIMING["STEWARD_LEASE_SECONDS"]),
        HEARTBEAT_SECONDS=float(TIMING["STEWARD_HEARTBEAT_SECONDS"]),
        SWEEP_SECONDS=float(TIMING["STEWARD_SWEEP_SECONDS"]),
        REDISPATCH_SECONDS=float(TIMING["STEWARD_REDISPATCH_SECONDS"]),
        MAX_CRASHES=int(TIMING["STEWARD_MAX_CRASHES"]),
    )
    settings.CELERY_TASK_DEFAULT_QUEUE = QUEUE


@pytest.fixture(scope="session", autouse=True)
def _flush_without_the_statement_timeout():
    """pytest-django empties the database after each transactional test with one
    TRUNCATE of every table, under this process's statement timeout (a third of the
    default lease: 10 s). On a loaded machine, beside the other xdist worker's writes
    and checkpoints, that TRUNCATE once outlasted it ("couldn't be flushed", in CI and
    in 2 of 4 CI-like runs). Emptying the test database is not what the timeout bounds
    (a stale worker's hold on rows), so the flush runs without it; a deadlock there, with
    a session that started writing after the test's end, is tried again. (After the
    first such test, most are put back table by table instead: _undo_what_the_test_changed.)

    The flush is the one TRUNCATE the tests mean. The tables that keep every row refuse it
    (migration 0022), so it goes past their guards as only their owner can (tests/tamper.py),
    inside its own transaction."""
    from django.db import transaction
    from django.db.backends.postgresql.operations import DatabaseOperations
    from django.db.utils import OperationalError

    flush = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        for tries_left in (2, 1, 0):
            try:
                with transaction.atomic(using=self.connection.alias), self.connection.cursor() as cur:
                    cur.execute("SET LOCAL statement_timeout = 0")
                    with triggers_off(cur, TRUNCATE_GUARDS):
                        return flush(self, sql_list)
            except OperationalError as exc:
                if not tries_left or "deadlock" not in str(exc):
                    raise

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "execute_sql_flush", execute_sql_flush)
        patch.setattr(TransactionTestCase, "_fixture_teardown", _undo_what_the_test_changed)
        yield


_baselines: dict[str, Baseline] = {}


def _undo_what_the_test_changed(case) -> None:
    """After a transactional test: the first one flushes every table as pytest-django does
    and keeps what that leaves; each later one puts back only the tables it changed
    (tests/fresh.py), which leaves the same rows at a tenth of the cost or less."""
    from django.db import connections

    for alias in case._databases_names(include_mirrors=False):
        conn = connections[alias]
        baseline = _baselines.get(alias)
        if baseline is None or not baseline.restore():
            full_flush(conn)
        if baseline is None:
            baseline = _baselines[alias] = Baseline(conn)
            baseline.capture()
        changed = baseline.triggers_changed()
        assert not changed, f"the test left triggers switched: {changed} ((table, trigger): (was, now))"


@pytest.fixture(autouse=True)
def _fast_passwords(request):
    """The personas' passwords are hashed for every test that makes them (the database is
    emptied after each), and PBKDF2's deliberate cost was most of the console tests'
    setup: a second a test. A test that starts processes keeps the real hasher, since a
    web server it starts (tests/e2e/) checks the passwords with its own settings."""
    if request.node.get_closest_marker("process"):
        yield
        return
    settings = request.getfixturevalue("settings")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings():
    """One test database per session (test_<name>_<pid>): two sessions sharing a server
    (a developer's and CI's, say) never drop each other's database. The session connects
    as STEWARD_TEST_DATABASE_URL's role when one is given, its children as DATABASE_URL's."""
    db = connection.settings_dict
    CHILDREN_CONNECT_AS.update({key: db[key] for key in CONNECT_AS})
    harness = os.environ.get("STEWARD_TEST_DATABASE_URL")
    if harness:
        session = console_env.database_from_url(harness, "STEWARD_TEST_DATABASE_URL")
        db.update({key: session[key] for key in CONNECT_AS})
        connection.close_pool()  # none is open yet; a pool made before would keep the old role
    db.setdefault("TEST", {})["NAME"] = f"test_{db['NAME']}_{os.getpid()}"
    # A `migrate` in this session migrates the test database, as its creator: never, as
    # STEWARD_MIGRATE_DATABASE_URL's owner, the database `make test` migrated before.
    settings.STEWARD["MIGRATE_DATABASE"] = "default"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, then a teardown that can always drop the test database. The drop
    runs under the settings' statement timeout (a third of the lease), and after a suite
    of real processes PostgreSQL's checkpoint before DROP DATABASE outlasted it on a
    loaded machine; a session a killed process left behind would also block it. So:
    no timeout, the leftover sessions ended, a checkpoint first.

    Before the tests, the test database gets the harness's clock (runtime/testing.py),
    at no skew: every process the tests start then reads now() through the same
    functions, and a test that moves the clock moves it for them too."""
    with django_db_blocker.unblock():
        install_clock()
    yield
    with django_db_blocker.unblock():
        options = connection.settings_dict.setdefault("OPTIONS", {})
        options["options"] = f"{options.get('options', '')} -c statement_timeout=0".strip()
        connection.close()
        with connection.cursor() as cur:
            # Also on the connection itself: with the psycopg pool, closing hands the
            # connection back to a pool made with the old options, so the one lent out
            # next still carries the timeout, and CHECKPOINT after a write-heavy run on a
            # loaded machine outlasted it ("canceling statement due to statement timeout").
            cur.execute("SET statement_timeout = 0")
            cur.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            cur.execute("CHECKPOINT")
        connection.close()


@pytest.fixture(autouse=True)
def _stop_lease_keeper():
    """A test that runs attempts in this process starts the lease keeper thread, whose
    database connection would keep the test database open at teardown."""
    yield
    keeper.stop()


def database_url(db: dict) -> str:
    """A URL for the test database that child processes can use (console/env.py)."""
    auth = quote(db["USER"]) + (":" + quote(db["PASSWORD"]) if db["PASSWORD"] else ":")
    host = db["HOST"] or ""
    if host.startswith("/"):  # a unix socket directory (the embedded PostgreSQL)
        return f"postgresql://{auth}@/{db['NAME']}?host={quote(host)}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgresql://{auth}@{host}{port}/{db['NAME']}"


@pytest.fixture(scope="session")
def child_env(django_db_setup, django_db_blocker) -> dict:
    """The environment for worker and supervisor processes: the test database, our queue,
    the short timings, and the test agents."""
    env = dict(os.environ)
    env.update(TIMING)
    env.update(
        DATABASE_URL=database_url({**connection.settings_dict, **CHILDREN_CONNECT_AS}),
        REDIS_URL=settings.REDIS_URL,
        STEWARD_QUEUE=QUEUE,
        STEWARD_AGENT_MODULES="console.dev.demo.agents,tests.agents",
        STEWARD_DB_POOL_MIN="1",
        STEWARD_DB_POOL_MAX="4",
        PYTHONPATH=os.pathsep.join(filter(None, [str(settings.BASE_DIR), env.get("PYTHONPATH")])),
    )
    env.pop("STEWARD_FAULT_POINTS", None)
    # i21-roles: the worker role's address for the test database, which the harness gives
    # workers, supervisors and beat as their DATABASE_URL (console/env.py as_worker).
    worker = os.environ.get("STEWARD_WORKER_DATABASE_URL")
    if worker:
        role = console_env.database_from_url(worker, "STEWARD_WORKER_DATABASE_URL")
        env["STEWARD_WORKER_DATABASE_URL"] = database_url(
            {**connection.settings_dict, **CHILDREN_CONNECT_AS, "USER": role["USER"], "PASSWORD": role["PASSWORD"]}
        )
    else:
        env.pop("STEWARD_WORKER_DATABASE_URL", None)
    # The owner's and the session's own addresses name the database `make test` migrated,
    # not the test database, and a child is the application: it gets neither.
    env.pop("STEWARD_MIGRATE_DATABASE_URL", None)
    env.pop("STEWARD_TEST_DATABASE_URL", None)
    return env


@pytest.fixture
def fleet(child_env):
    """Start workers and supervisors; all are killed (SIGKILL) when the test ends."""
    started = Fleet(child_env)
    yield started
    started.stop_all()


@pytest.fixture(scope="module")
def warm_fleet(child_env):
    """The module's warm workers (tests/harness.py WarmFleet), killed when it ends."""
    started = WarmFleet(child_env)
    yield started
    started.close()


@pytest.fixture
def shared_fleet(warm_fleet, live):
    """`fleet` for a module whose tests may share workers: a module opts in with

        @pytest.fixture
        def fleet(shared_fleet):
            return shared_fleet

    After the test, a warm worker still running an attempt (one the test left running)
    is killed, not lent to the next test, and so is any the test killed or froze."""
    yield warm_fleet
    running = Attempt.objects.filter(ended_at__isnull=True).values_list("worker", flat=True)
    warm_fleet.end_test(int(name.rpartition(":")[2]) for name in running if name.rpartition(":")[2].isdigit())


@pytest.fixture
def fake():
    with FakeService() as service:
        yield service


@pytest.fixture
def live(transactional_db):
    """Committed data, visible to other processes (workers, supervisors).

    It starts with the session's Celery queue empty, as the database is: a wake-up an
    earlier test left there names work in a database flushed since, and a worker this
    test starts would take it (one armed to hold still at its claim then never answers
    a ping). Afterwards, whatever the test did (workers killed mid-attempt included), every
    pool's kept admission count must equal a recount of its queued and running tasks."""
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(QUEUE)
    yield transactional_db
    drift = count_drift()
    assert not drift, f"kept admission counts drifted from a recount (kept, recounted): {drift}"
    _quiet_before_the_flush()


def _quiet_before_the_flush() -> None:
    """The database is emptied after a `live` test (tests/fresh.py: DELETEs of the tables
    it changed, or pytest-django's TRUNCATE of every table), which waits for every other
    session's open transaction that holds those rows (a killed worker's backend until it
    notices its client is gone, a web server's request still finishing). Wait for those
    to end first; one that does not is named here, not left as "couldn't be flushed"."""

    def in_a_transaction():
        with connection.cursor() as cur:
            cur.execute(
                "SELECT pid, application_name, state, wait_event_type, "
                "round(extract(epoch FROM now() - xact_start)::numeric, 1), left(query, 120) "
                "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend' AND xact_start IS NOT NULL"
            )
            return cur.fetchall()

    try:
        wait_until(
            lambda: not in_a_transaction(),
            timeout=30,
            interval=0.05,
            message="the test's other database sessions to end their transactions",
        )
    except AssertionError:
        raise AssertionError(f"sessions still in a transaction before the flush: {in_a_transaction()}") from None
