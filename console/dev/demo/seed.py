"""`manage.py seed_demo`: the demo's tenants and people, pools and tasks. Idempotent: a
person, a membership or a pool that exists is kept as it is (an operator may have
changed a pool's limits or a person's role, and `make run` seeds on every start), and
the tasks carry caller keys, so running it again returns the same tasks."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from console.access import agent_steward_set, person_principal
from console.dev.demo.logins import DEMO_ADMIN, DEMO_PEOPLE, DEMO_TENANTS
from console.models import Membership, Tenant
from runtime.authz.services import grant_create
from runtime.errors import PoolExists
from runtime.limits.services import pool_create
from runtime.models import Grant, Pool
from runtime.tasks.services import task_submit

POOLS = {
    "research": {"max_running": 4, "max_queued": 200},
    "notifications": {"max_running": 2, "max_queued": 50},
}

# (tenant, caller key, agent, input, owner)
TASKS = [
    # Started by dave, so that alice (an operator; the starter may not approve) finds its
    # request to submit the results in her approvals inbox.
    (
        "acme",
        "demo-research-approve",
        "research.batch",
        {
            "question": "Which learning rate schedule converges fastest?",
            "experiments": 4,
            "overnight_seconds": 20,
            "approve_results": True,
        },
        "dave",
    ),
    (
        "acme",
        "demo-notify-1",
        "notify.send",
        {"to": "oncall@example.com", "message": "The overnight research batch has started."},
        "alice",
    ),
    (
        "globex",
        "demo-research-2",
        "research.batch",
        {"question": "Does batch size change the final loss?", "experiments": 3, "overnight_seconds": 30},
        "carol",
    ),
]


# (tenant, principal, action, resource), granted by the tenant's first admin-or-operator
# below. The demo agents do not call authorize() yet: these give the agents, grants and
# decisions screens something to show, and the revoke journey something to revoke.
GRANTS = [
    ("acme", "agent:research.batch", "model.call", "model:*"),
    ("acme", "agent:research.batch", "tool.search", "repo:acme/*"),
    ("acme", "agent:research.experiment", "model.call", "model:*"),
    ("acme", "agent:notify.send", "http.post", "notify:oncall@example.com"),
    ("acme", "user:alice", "model.call", "model:*"),
    ("acme", "user:alice", "tool.search", "repo:*"),
    ("acme", "user:alice", "http.post", "notify:*"),
    ("globex", "agent:research.batch", "model.call", "model:*"),
    ("globex", "user:carol", "model.call", "model:*"),
]
GRANTED_BY = {"acme": "dave", "globex": "carol"}
# alice (operator of acme) may change research.batch's grants there: a guardian right.
STEWARDS = [("acme", "research.batch", "alice")]


def seed_demo(*, actor: str) -> list[str]:
    lines = _people()
    if settings.DEBUG:
        lines += _authority()
    for name, limits in POOLS.items():
        try:
            lines.append(f"pool {pool_create(name=name, actor=actor, note='demo seed', **limits)} created")
        except PoolExists:
            lines.append(f"pool {Pool.objects.get(name=name)} kept")
    for tenant, key, agent, payload, owner in TASKS:
        sub = task_submit(
            agent=agent, input=payload, tenant=tenant, owner=f"user:{owner}", actor=actor, idempotency_key=key
        )
        lines.append(f"task {sub.task_id} {agent} [{sub.status}]{'' if sub.created else ' (already seeded)'}")
    return lines


def _people() -> list[str]:
    """The demo's tenants and people, only in DEBUG (never in a production deploy)."""
    if not settings.DEBUG:
        return ["no demo people (STEWARD_DEBUG is off)"]
    users = get_user_model().objects
    for slug, name in DEMO_TENANTS.items():
        Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    lines = []
    for username, (tenant, role, password) in DEMO_PEOPLE.items():
        user = users.filter(username=username).first()
        if user is None:
            user = users.create_user(username=username, email=f"{username}@example.com", password=password)
        membership, _ = Membership.objects.get_or_create(user=user, tenant_id=tenant, defaults={"role": role})
        lines.append(f"person {username} / {password}: {membership.role} of {tenant} (demo only)")
    username, password = DEMO_ADMIN
    if not users.filter(username=username).exists():
        users.create_superuser(username=username, email=f"{username}@example.com", password=password)
    lines.append(f"admin {username} / {password}: the Django admin (demo only)")
    return lines


def _authority() -> list[str]:
    """The demo's grants and stewards, each made only if missing (no grant of the same
    principal, action and resource, live or not): a grant revoked in the console stays
    revoked across restarts. dave may also use the Django admin's grant actions."""
    users = get_user_model().objects
    made = 0
    for tenant, principal, action, resource in GRANTS:
        if not Grant.objects.filter(tenant=tenant, principal=principal, action=action, resource=resource).exists():
            grant_create(
                tenant=tenant, principal=principal, action=action, resource=resource, actor=f"user:{GRANTED_BY[tenant]}"
            )
            made += 1
    for tenant, agent_name, username in STEWARDS:
        admin = users.get(username=GRANTED_BY[tenant])
        who = person_principal(admin, tenant, channel="seed", credential="seed_demo")
        agent_steward_set(principal=who, name=agent_name, username=username, allowed=True, reason="demo seed")
    dave = users.get(username="dave")
    if not dave.is_staff:
        dave.is_staff = True
        dave.save(update_fields=["is_staff"])
    dave.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="runtime", codename__in=["view_grant", "view_task", "view_auditevent"]
        )
    )
    return [f"grants: {made} given, {len(GRANTS) - made} kept; alice may change research.batch's grants in acme"]
