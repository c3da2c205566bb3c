"""The database roles Steward runs as, and what each may do (docs/deploy.md, docs/adr/0022-database-roles.md).

An owner owns the schema and runs `manage.py migrate`. Every other role connects the
application and holds one profile's privileges, never ownership, so it cannot TRUNCATE,
ALTER a table (and with it disable a trigger), or set session_replication_role (a
superuser's parameter): the append-only tables' triggers hold against anything the
application can be made to run. This module is the one place that says so:

* PROFILES: what each application role may do: `web` (people's actions, the gateway) and
  `worker` (the runtime's writes; docs/adr/0035-web-and-worker-roles.md). Adding a role is
  an entry here and its name in settings.
* privileges_grant: gives each configured role exactly its profile, on every table,
  sequence and routine of the schema. `manage.py migrate` runs it after every migration
  run (runtime/management/commands/migrate.py), so a table a later migration creates is
  covered by the same command that created it.
* role_ensure, database_ensure and schema_adopt: create the roles and the database, and
  move to the owner what an older install made as the superuser, where Steward manages the
  cluster itself (the embedded PostgreSQL, console/dev/services.py; the tests' private
  servers). A deployment's DBA does that part by hand (docs/deploy.md).

Plain SQL over any DB-API cursor, psycopg's or Django's: console/dev/services.py calls it
before Django is set up. Names are quoted here, never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The embedded PostgreSQL's roles, named as docs/deploy.md names them.
OWNER = "steward_owner"
# The web role keeps the name the single application role had (an install from before
# the split keeps its role, now narrowed to nothing new); workers get a role of their own.
ROLE_NAMES = {"web": "steward_app", "worker": "steward_worker"}
# Serialises role and database set-up between processes that start at once (`make run` in
# two terminals, two test sessions): a session lock in the maintenance database.
SETUP_LOCK = 0x5354_4557_0022
ROLE_LOCK = SETUP_LOCK + 1


@dataclass(frozen=True)
class Profile:
    """What a role may do on every table, sequence and routine of the schema, and nothing else.

    `tables` holds on every table that `only` does not name: for the worker that is
    SELECT, so a table a later migration adds is read-only to it until it is named here
    (fail closed). `only`: a table's own privileges instead (none: the role cannot even
    read it). `columns`: column-level privileges added on top, the honest boundary where a
    role may move some columns of a row and not others."""

    tables: tuple[str, ...]
    sequences: tuple[str, ...]
    routines: tuple[str, ...]
    only: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    columns: Mapping[str, tuple[tuple[str, tuple[str, ...]], ...]] = field(default_factory=dict)


ROWS = ("SELECT", "INSERT", "UPDATE", "DELETE")
APPEND = ("SELECT", "INSERT")
# The runtime's own rows, which workers, supervisors and the sweeps write: tasks and their
# attempts, journal and effects, slots and admission counts, stops' progress and their
# acknowledgments' bookkeeping, processes, schedules' next fire, usage.
RUNTIME_TABLES = (
    "steward_attempt",
    "steward_step",
    "steward_effect",
    "steward_slot",
    "steward_pool_count",
    "steward_process",
    "steward_process_minute",
    "steward_stop",
    "steward_tree_pause",
    "steward_gateway_call",
    "steward_token_usage",
    "steward_webhook_delivery",
)
# Rows that say on whose authority work runs (a task's owner, tenant, agent and lineage; a
# schedule's or a dependency trigger's owner and target): the worker moves their state
# and nothing else, so agent code cannot make its task, or the next one a trigger
# submits, run as someone else. A task is created only through steward_submit(), whose
# trigger holds a worker's submission to a parent's or a trigger's owner (migration 0027).
MOVED_COLUMNS = {
    "steward_task": (
        "status",
        "epoch",
        # The claim that starts a task fixes its agent version, once (runtime/sql/claim.sql,
        # docs/adr/0037-agent-versions.md): the worker serves it; the web upgrades it.
        "agent_version",
        "next_reason",
        "crash_count",
        "wake_at",
        "waiting_on",
        "requested_scope",
        "blocked_reason",
        "blocked_decision_id",
        "breaker",
        "breaker_limits",
        "stop_id",
        "stop_deadline",
        "output",
        "error",
        "status_note",
        "updated_at",
        "queued_at",
        "started_at",
        "finished_at",
        # The retention job (the daily sweep) tombstones finished tasks' payloads
        # (runtime/lifecycle/): `input` moves only to its tombstone there.
        "input",
        "erased_at",
        "erased_by",
        "erased_hash",
    ),
    "steward_schedule": ("next_fire_at", "last_tick_at", "last_task_id", "updated_at"),
    "steward_dependency_trigger": ("state", "reason", "task_id", "settled_at"),
}
# Append-only records the runtime adds to (their triggers refuse UPDATE and DELETE to
# everyone): the audit trail, decisions, stops' acknowledgments, seals.
APPEND_TABLES = (
    "steward_audit",
    "steward_decision",
    "steward_stop_ack",
    "steward_audit_seal",
    "steward_audit_seal_head",
)
# Secrets the worker has no reason to read: sessions, password and token hashes,
# sign-in attempts.
SECRET_TABLES = (
    "django_session",
    "auth_user",
    "steward_api_token",
    "steward_worker_credential",  # its hashes, and its uses: the minting service's (ADR 0034)
    "axes_accessattempt",
    "axes_accessattemptexpiration",
    "axes_accessfailurelog",
    "axes_accesslog",
)

PROFILES = {
    # The web process (people's actions, the credential gateway) and the CLI: rows only.
    # TRUNCATE, REFERENCES and TRIGGER are left out, and ownership with them.
    "web": Profile(tables=ROWS, sequences=("USAGE", "SELECT"), routines=("EXECUTE",)),
    # Workers, beat and supervisors: the runtime's rows, appends to the records, and a
    # read of everything else. No INSERT, UPDATE, DELETE or TRUNCATE on a governance
    # table (grants, authz revisions, budgets, quotas, pools, tenants, members, tokens,
    # the console's and Django's tables). An approval is created pending and moved only
    # to expired, stale or consumed: its decider columns are the web's alone, and the
    # table's trigger refuses a decision from a role without them.
    "worker": Profile(
        tables=("SELECT",),
        sequences=("USAGE", "SELECT"),
        routines=("EXECUTE",),
        only={
            **dict.fromkeys(RUNTIME_TABLES, ROWS),
            **dict.fromkeys(APPEND_TABLES, APPEND),
            **dict.fromkeys(SECRET_TABLES, ()),
            "steward_approval": APPEND,
            # Agent memory: a new version is an INSERT; no worker changes one.
            "steward_memory_record": APPEND,
        },
        columns={
            "steward_approval": (
                ("UPDATE", ("state", "stale_reason", "checked_at", "decided_at")),
                # Tombstones by the retention job; the table's trigger admits nothing else.
                ("UPDATE", ("action", "context", "erased_at", "erased_by", "erased_hash")),
            ),
            # Memory tombstones by the retention job (runtime/lifecycle/); the table's
            # trigger (steward_memory_record_only_erased) admits nothing else.
            "steward_memory_record": (("UPDATE", ("payload", "erased_at", "erased_by", "erased_hash")),),
            **{table: (("UPDATE", columns),) for table, columns in MOVED_COLUMNS.items()},
        },
    ),
}


def quote(name: str) -> str:
    """An SQL identifier, quoted: any name PostgreSQL allows, and nothing injected."""
    if not name or "\x00" in name:
        raise ValueError(f"not a name: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def profile_statements(profile: Profile, role: str, *, schema: str, database: str, tables: list[str]) -> list[str]:
    """Revoke what the role holds, then grant the profile on `tables` (the schema's): after
    a profile narrows (a role split), the next migrate takes back what it no longer allows."""
    role, quoted_schema, database = quote(role), quote(schema), quote(database)
    statements = [
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {quoted_schema} FROM {role}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {quoted_schema} FROM {role}",
        f"REVOKE ALL ON ALL ROUTINES IN SCHEMA {quoted_schema} FROM {role}",
        f"GRANT CONNECT ON DATABASE {database} TO {role}",
        f"GRANT USAGE ON SCHEMA {quoted_schema} TO {role}",
    ]
    # (Revoking a table's privileges revokes its column-level ones too.)
    if not profile.only and not profile.columns:
        statements.append(f"GRANT {', '.join(profile.tables)} ON ALL TABLES IN SCHEMA {quoted_schema} TO {role}")
    else:
        for table in tables:
            privileges = profile.only.get(table, profile.tables)
            if privileges:
                statements.append(f"GRANT {', '.join(privileges)} ON {quoted_schema}.{quote(table)} TO {role}")
            for privilege, columns in profile.columns.get(table, ()):
                names = ", ".join(quote(c) for c in columns)
                statements.append(f"GRANT {privilege} ({names}) ON {quoted_schema}.{quote(table)} TO {role}")
    statements += [
        f"GRANT {', '.join(profile.sequences)} ON ALL SEQUENCES IN SCHEMA {quoted_schema} TO {role}",
        f"GRANT {', '.join(profile.routines)} ON ALL ROUTINES IN SCHEMA {quoted_schema} TO {role}",
    ]
    return statements


def privileges_grant(cursor, roles: Mapping[str, str]) -> list[str]:
    """Give each role in `roles` (profile name -> role name) exactly its profile on the
    current schema, as the connected role (the owner, or a superuser). A role that is the
    connected role itself is left alone: revoking from the owner would lock it out of its
    own tables, and a deployment that runs everything as one role has nothing to grant.
    Returns the roles granted. Run it inside a transaction: all of it or none."""
    cursor.execute("SELECT current_user, current_schema(), current_database()")
    me, schema, database = cursor.fetchone()
    cursor.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
        "AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1"
    )
    tables = [row[0] for row in cursor.fetchall()]
    granted = []
    for profile, role in roles.items():
        if role == me or role in granted:
            # The same role named for two profiles (a worker's own process, or a
            # deployment with one application role): the first profile named holds.
            continue
        for statement in profile_statements(PROFILES[profile], role, schema=schema, database=database, tables=tables):
            cursor.execute(statement)
        granted.append(role)
    return granted


def role_ensure(cursor, name: str) -> None:
    """Create login role `name` unless it exists, with LOGIN and nothing more; a role found
    with more (made a superuser by hand) is brought back to that.

    Safe when several processes do it at once. They take turns on a transaction lock, so
    no two ALTER one role together (PostgreSQL refuses the second: "tuple concurrently
    updated"); the lock is per database, so a CREATE ROLE from a session elsewhere that
    finds the role made (duplicate_object), or loses on the catalog's unique index
    (unique_violation), leaves the other's."""
    role, literal = quote(name), "'" + name.replace("'", "''") + "'"
    cursor.execute(
        f"""DO $$ BEGIN
    PERFORM pg_advisory_xact_lock({ROLE_LOCK});
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {literal}) THEN
        CREATE ROLE {role} LOGIN;
    ELSIF EXISTS (SELECT FROM pg_roles WHERE rolname = {literal} AND (NOT rolcanlogin OR rolsuper OR rolcreatedb
                  OR rolcreaterole OR rolreplication OR rolbypassrls)) THEN
        ALTER ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$"""
    )


def database_ensure(cursor, name: str, *, owner: str) -> None:
    """Create database `name` owned by `owner`, or give an existing one to it. Autocommit:
    CREATE DATABASE runs outside a transaction."""
    cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    if cursor.fetchone() is None:
        cursor.execute(f"CREATE DATABASE {quote(name)} OWNER {quote(owner)}")
    else:
        cursor.execute(f"ALTER DATABASE {quote(name)} OWNER TO {quote(owner)}")


# Everything in the current schema that `owner` does not own, as the ALTER ... OWNER TO
# that moves it. A table's own sequences and indexes follow it; so do the row types of
# tables. Before this module, the embedded PostgreSQL ran migrations as its superuser.
_NOT_OWNED = """
SELECT format('ALTER %%s %%s OWNER TO %%I', kind, name, %(owner)s::text) FROM (
    SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE'
                          WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END AS kind,
           c.oid::regclass::text AS name, c.relowner AS owner
    FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                                  AND d.deptype IN ('a', 'i'))
    UNION ALL
    SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE' ELSE 'FUNCTION' END,
           p.oid::regprocedure::text, p.proowner
    FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace
    UNION ALL
    SELECT 'TYPE', t.oid::regtype::text, t.typowner
    FROM pg_type t WHERE t.typnamespace = current_schema()::regnamespace AND t.typtype IN ('e', 'd', 'r')
) o
WHERE o.owner <> (SELECT r.oid FROM pg_roles r WHERE r.rolname = %(owner)s::text)
ORDER BY 1
"""


def schema_adopt(cursor, owner: str) -> int:
    """Give `owner` everything in the current schema it does not own yet; returns how many
    objects moved. Run as a superuser, in the database."""
    cursor.execute(_NOT_OWNED, {"owner": owner})
    statements = [row[0] for row in cursor.fetchall()]
    for statement in statements:
        cursor.execute(statement)
    return len(statements)
