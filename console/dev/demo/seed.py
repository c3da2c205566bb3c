"""`manage.py seed_demo`: the demo's tenants and people, pools and tasks. Idempotent: a
person, a membership or a pool that exists is kept as it is (an operator may have
changed a pool's limits or a person's role, and `make run` seeds on every start), and
the tasks carry caller keys, so running it again returns the same tasks."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model

from console.dev.demo.logins import DEMO_ADMIN, DEMO_PEOPLE, DEMO_TENANTS
from console.models import Membership, Tenant
from runtime.errors import PoolExists
from runtime.limits.services import pool_create
from runtime.models import Pool
from runtime.tasks.services import task_submit

POOLS = {
    "research": {"max_running": 4, "max_queued": 200},
    "notifications": {"max_running": 2, "max_queued": 50},
}

# (tenant, caller key, agent, input, owner)
TASKS = [
    ("acme", "demo-research-1", "research.batch",
     {"question": "Which learning rate schedule converges fastest?", "experiments": 4, "overnight_seconds": 20},
     "alice"),
    ("acme", "demo-notify-1", "notify.send",
     {"to": "oncall@example.com", "message": "The overnight research batch has started."}, "alice"),
    ("globex", "demo-research-2", "research.batch",
     {"question": "Does batch size change the final loss?", "experiments": 3, "overnight_seconds": 30}, "carol"),
]


def seed_demo(*, actor: str) -> list[str]:
    lines = _people()
    for name, limits in POOLS.items():
        try:
            lines.append(f"pool {pool_create(name=name, actor=actor, note='demo seed', **limits)} created")
        except PoolExists:
            lines.append(f"pool {Pool.objects.get(name=name)} kept")
    for tenant, key, agent, payload, owner in TASKS:
        sub = task_submit(agent=agent, input=payload, tenant=tenant, owner=f"user:{owner}", actor=actor,
                          idempotency_key=key)
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
