"""A hostile in-process agent (tests/integration/test_hostile_worker.py): deployed code
that runs in a real worker and tries every governance write it can reach through the
worker's own connection, the ORM, the services and raw SQL. It reports what PostgreSQL
answered for each (the SQLSTATE, or "ok" if the write went through) and changes nothing
itself: each try runs in a savepoint that a refusal rolls back."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from console.models import ApiToken, Membership, Tenant
from runtime.agents import agent
from runtime.authz.services import grant_create
from runtime.models import Approval, AuditEvent, Budget, Decision, Grant, Pool, Quota

FORGED = "user:dave"


def sqlstate(error: BaseException) -> str:
    """The SQLSTATE behind a Django or psycopg error; the error's type if it has none."""
    seen = error
    while seen is not None:
        state = getattr(seen, "sqlstate", None)
        if state:
            return state
        seen = seen.__cause__
    return type(error).__name__


def attempt(write, *, atomic: bool = True) -> str:
    try:
        if not atomic:  # a service that opens its own durable transaction
            write()
            return "ok"
        with transaction.atomic():
            write()
    except Exception as error:
        return sqlstate(error)
    return "ok"


def raw(statement: str, params=()):
    def run():
        with connection.cursor() as cur:
            cur.execute(statement, params)

    return run


def _unmarked_grant(tenant: str):
    """Issue 21's first finding: clear the mark that says agent code runs, then create a
    grant as a person through the service."""

    def run():
        with connection.cursor() as cur:
            cur.execute("SELECT set_config('steward.agent_task', '', false)")
        grant_create(tenant=tenant, principal="agent:t.hostile_roles", action="tool.call", resource="*", actor=FORGED)

    return run


@agent("t.hostile_roles")
def hostile(ctx, input):
    tenant = input["tenant"]
    approval = input["approval"]
    now = datetime.now(UTC)
    tries = {
        "grant: ORM create": lambda: Grant.objects.create(
            tenant=tenant,
            principal="agent:t.hostile_roles",
            action="tool.call",
            resource="*",
            granted_by=FORGED,
            revision=1,
        ),
        "grant: ORM revoke": lambda: Grant.objects.filter(tenant=tenant).update(revoked_at=now),
        "approval: ORM approve": lambda: Approval.objects.filter(id=approval).update(
            state="approved", decided_by=FORGED, decided_at=now
        ),
        "approval: ORM approve, state only": lambda: Approval.objects.filter(id=approval).update(state="approved"),
        "approval: ORM delete": lambda: Approval.objects.filter(id=approval).delete(),
        "budget: ORM create": lambda: Budget.objects.create(tenant=tenant, updated_by=FORGED),
        "budget: ORM raise": lambda: Budget.objects.filter(tenant=tenant).update(tenant_tokens=None),
        "quota: ORM delete": lambda: Quota.objects.filter(tenant=tenant).delete(),
        "pool: ORM raise limits": lambda: Pool.objects.update(max_running=10_000),
        "member: ORM promote": lambda: Membership.objects.filter(tenant_id=tenant).update(role="admin"),
        "tenant: ORM rename": lambda: Tenant.objects.filter(slug=tenant).update(name="owned"),
        "person: ORM superuser": lambda: get_user_model().objects.update(is_superuser=True),
        "api token: ORM revive": lambda: ApiToken.objects.update(revoked_at=None),
        "audit: ORM update": lambda: AuditEvent.objects.filter(tenant=tenant).update(actor=FORGED),
        "decision: ORM delete": lambda: Decision.objects.filter(tenant=tenant)._raw_delete(Decision.objects.db),
        "grant: raw SQL after set_config": lambda: (
            raw("SELECT set_config('steward.agent_task', '', false)")(),
            raw("UPDATE steward_grant SET revoked_at = NULL")(),
        ),
    }
    answers = {name: attempt(write) for name, write in tries.items()}
    answers["grant: set_config then grant_create as dave"] = attempt(_unmarked_grant(tenant), atomic=False)
    return answers
