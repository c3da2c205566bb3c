"""A hostile in-process agent against the worker role (issue 21, docs/adr/0035-web-and-worker-roles.md).

Agent code in a worker is the deployer's code and holds what the worker holds: its
database connection, and the worker role's address. Each governance write it could try
is tried here, every way it could: through the ORM and the services from inside a real
worker (tests/hostile_agents.py), and with raw SQL on a connection made exactly as the
worker makes it, plain, after clearing the session setting that marks agent code, after
SET ROLE / SET SESSION AUTHORIZATION to the web role, the owner or the superuser, after
RESET ROLE, and on a second connection. PostgreSQL refuses each with
insufficient_privilege (42501), and no governance table changes.

On a main from before the worker role, workers connect as the one application role:
every write below goes through, or is refused by a trigger with another SQLSTATE.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

import tests.hostile_agents  # noqa: F401 - registers t.hostile_roles in this process
from runtime import roles
from runtime.authz.services import grant_create
from runtime.limits.budgets import budget_set, quota_set
from runtime.models import Approval, Task
from runtime.tasks.services import task_submit
from tests.harness import wait_until
from tests.people import make_people

pytestmark = [pytest.mark.integration]

OWNER = "user:alice"
ADMIN = "user:dave"
INSUFFICIENT_PRIVILEGE = "42501"
# What no worker may change; their rows' digests before and after must be equal.
GOVERNANCE = [
    "steward_grant",
    "steward_authz_revision",
    "steward_budget",
    "steward_quota",
    "steward_pool",
    "steward_tenant",
    "steward_membership",
    "steward_api_token",
    "steward_agent_identity",
    "steward_approval",
    "steward_audit",
    "steward_decision",
    "steward_audit_seal",
    "steward_stop_ack",
    "auth_user",
    "guardian_userobjectpermission",
    "django_session",
]
# Each governance write as SQL: an INSERT of nothing still needs INSERT (PostgreSQL checks
# privileges before it reads a row), an UPDATE and a DELETE touch the rows there are.
WRITES = {
    "grant insert": "INSERT INTO steward_grant SELECT * FROM steward_grant WHERE false",
    "grant revoke": "UPDATE steward_grant SET revoked_at = now(), revoked_by = 'user:dave'",
    "grant delete": "DELETE FROM steward_grant",
    "authz revision bump": "UPDATE steward_authz_revision SET revision = revision + 1",
    "budget raise": "UPDATE steward_budget SET tenant_tokens = NULL",
    "budget insert": "INSERT INTO steward_budget SELECT * FROM steward_budget WHERE false",
    "quota delete": "DELETE FROM steward_quota",
    "pool raise": "UPDATE steward_pool SET max_running = 10000",
    "pool insert": "INSERT INTO steward_pool (name, max_running, max_queued) VALUES ('hostile', 10000, 10000)",
    "member promote": "UPDATE steward_membership SET role = 'admin'",
    "member insert": "INSERT INTO steward_membership SELECT * FROM steward_membership WHERE false",
    "tenant rename": "UPDATE steward_tenant SET name = 'owned'",
    "person superuser": "UPDATE auth_user SET is_superuser = true, is_staff = true",
    "api token insert": "INSERT INTO steward_api_token SELECT * FROM steward_api_token WHERE false",
    "api token revive": "UPDATE steward_api_token SET revoked_at = NULL",
    "object permission": "INSERT INTO guardian_userobjectpermission SELECT * FROM guardian_userobjectpermission WHERE false",
    "session read": "SELECT * FROM django_session",
    "approval approve": "UPDATE steward_approval SET state = 'approved', decided_by = 'user:dave', decided_at = now()",
    "approval approve, state only": "UPDATE steward_approval SET state = 'approved'",
    "approval forged approved insert": (
        "INSERT INTO steward_approval SELECT (jsonb_populate_record(a, jsonb_build_object("
        "'id', gen_random_uuid(), 'part', 99, 'state', 'approved', 'decided_by', 'user:dave'))).* "
        "FROM steward_approval a"
    ),
    "approval delete": "DELETE FROM steward_approval",
    "audit update": "UPDATE steward_audit SET actor = 'user:dave'",
    "audit delete": "DELETE FROM steward_audit",
    "audit truncate": "TRUNCATE steward_audit",
    "audit forged grant.created": (
        "INSERT INTO steward_audit (actor, tenant, kind, data) VALUES ('user:dave', 'acme', 'grant.created', '{}')"
    ),
    "audit forged approval.approved": (
        "INSERT INTO steward_audit (actor, tenant, kind, data) VALUES ('user:dave', 'acme', 'approval.approved', '{}')"
    ),
    "decision update": "UPDATE steward_decision SET allowed = true, reason_code = 'granted'",
    "decision delete": "DELETE FROM steward_decision",
    "seal update": "UPDATE steward_audit_seal SET root = NULL",
    "seal delete": "DELETE FROM steward_audit_seal",
    "stop ack delete": "DELETE FROM steward_stop_ack",
    # On whose authority work runs: a task's owner, a task made directly or submitted as
    # someone else, a schedule's owner.
    "task owner": "UPDATE steward_task SET owner = 'user:dave'",
    "task tenant": "UPDATE steward_task SET tenant = 'globex'",
    "task insert": "INSERT INTO steward_task SELECT * FROM steward_task WHERE false",
    "task submitted as dave": (
        "SELECT * FROM steward_submit(NULL, 't.steps', '{}'::jsonb, 'x', 'acme', 'user:dave', "
        "(SELECT pool FROM steward_task LIMIT 1), NULL, 'user:dave', '{}'::jsonb, NULL, NULL, NULL, '')"
    ),
    "schedule owner": "UPDATE steward_schedule SET owner = 'user:dave'",
}


def _worker_url(child_env: dict) -> str:
    """The address a worker connects with (console/env.py as_worker; before the worker
    role, the one application role's)."""
    return child_env.get("STEWARD_WORKER_DATABASE_URL") or child_env["DATABASE_URL"]


def _ways(owner_roles: list[str]) -> dict[str, list[str]]:
    """What the agent runs before the write, on the same connection."""
    ways = {"plain": [], "set_config": ["SELECT set_config('steward.agent_task', '', false)"]}
    for role in owner_roles:
        ways[f"SET ROLE {role}"] = [f'SET ROLE "{role}"']
        ways[f"SET SESSION AUTHORIZATION {role}"] = [f'SET SESSION AUTHORIZATION "{role}"']
    ways["RESET ROLE"] = ["RESET ROLE", "RESET SESSION AUTHORIZATION"]
    return ways


def _digests(*more: str, besides=()) -> dict[str, str]:
    """Each table's row count and digest; `besides`: tasks whose own audit rows and
    decisions are left out (the worker's claim and end append them, as any task's do)."""
    with connection.cursor() as cur:
        out = {}
        for table in [*GOVERNANCE, *more]:
            mine = table in ("steward_audit", "steward_decision") and besides
            ids = ", ".join(f"'{task}'::uuid" for task in besides)
            where = f"WHERE t.task_id IS NULL OR t.task_id NOT IN ({ids})" if mine else ""
            cur.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM {table} t {where}"
            )
            out[table] = cur.fetchone()
        return out


@pytest.fixture
def governed(live):
    """Rows in every governance table the worker could reach: people and their tenants,
    a grant, a budget, a quota, a pending approval on a task, an audit trail."""
    make_people()
    grant_create(tenant="acme", principal=OWNER, action="tool.call", resource="*", actor=ADMIN)
    budget_set(tenant="acme", actor=ADMIN, tenant_tokens=1000)
    quota_set(tenant="acme", service="search", calls=10, window_seconds=60, actor=ADMIN)
    task = task_submit(agent="t.steps", input={"n": 0}, tenant="acme", owner=OWNER, actor=OWNER).task_id
    approval = Approval.objects.create(
        tenant="acme",
        task_id=task,
        seq=0,
        name="pay",
        agent="t.steps",
        owner=OWNER,
        action={"pay": 1},
        action_hash="0" * 64,
        effect_class="irreversible",
        context={},
        context_digest="0" * 64,
        untrusted=False,
        expires_at=timezone.now() + timedelta(hours=1),
    )
    return approval


def _refusal(conn: psycopg.Connection, statement: str) -> str:
    try:
        conn.execute(statement)
    except psycopg.Error as error:
        return error.sqlstate or type(error).__name__
    return "ok"


def test_every_governance_write_on_the_workers_connection_is_refused_every_way(governed, child_env):
    with connection.cursor() as cur:
        cur.execute("SELECT current_user")
        superuser = cur.fetchone()[0]
    others = [roles.ROLE_NAMES["web"], roles.OWNER, superuser, "postgres"]
    before = _digests("steward_task", "steward_schedule")
    url = _worker_url(child_env)
    outcomes, preludes = {}, {}
    for way, prelude in _ways(list(dict.fromkeys(others))).items():
        for name, statement in WRITES.items():
            # A new connection per try: each is the worker's, or an agent's second one.
            with psycopg.connect(url, autocommit=True) as conn:
                preludes[way] = {_refusal(conn, step) for step in prelude} - {"ok"} or {"ok"}
                outcomes[(way, name)] = _refusal(conn, statement)
    refused = {key: state for key, state in outcomes.items() if state != INSUFFICIENT_PRIVILEGE}
    assert refused == {}, f"not refused with 42501 (way, write) -> SQLSTATE: {refused}"
    # SET ROLE and SET SESSION AUTHORIZATION to any other role are refused themselves.
    assert {way: states for way, states in preludes.items() if way.startswith("SET ")} == {
        way: {INSUFFICIENT_PRIVILEGE} for way in preludes if way.startswith("SET ")
    }
    assert _digests("steward_task", "steward_schedule") == before


def test_a_hostile_agent_in_a_real_worker_writes_no_governance_row(governed, child_env, fleet):
    before = _digests(besides=[governed.task_id])
    modules = child_env["STEWARD_AGENT_MODULES"] + ",tests.hostile_agents"
    fleet.workers(1, env={"STEWARD_AGENT_MODULES": modules})
    task = task_submit(
        agent="t.hostile_roles",
        input={"tenant": "acme", "approval": str(governed.id)},
        tenant="acme",
        owner=OWNER,
        actor=OWNER,
    ).task_id
    done = wait_until(
        lambda: Task.objects.filter(id=task, status__in=["completed", "failed"]).first(),
        timeout=60,
        message="the hostile agent to finish",
    )
    assert done.status == "completed", done.error
    answers = done.output
    assert answers, "the hostile agent reported nothing"
    # Issue 21's first finding among them: set_config, then grant_create as dave.
    assert "grant: set_config then grant_create as dave" in answers
    assert {name: state for name, state in answers.items() if state != INSUFFICIENT_PRIVILEGE} == {}
    # The worker also ran the fixture's task, whose approval is pending.
    ran = [task, governed.task_id]
    assert _digests(besides=ran) == before
    # What they appended of their own is the runtime's: no row of a person's act.
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT kind FROM steward_audit WHERE task_id = ANY(%s) ORDER BY 1", [ran])
        assert {kind for (kind,) in cur.fetchall()} <= {"task.submitted", "attempt.started", "task.completed"}
