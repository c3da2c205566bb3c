"""`manage.py seed_demo`: the demo's pools and tasks. Idempotent: a pool that
exists keeps the limits it has (an operator may have changed them, and `make run`
seeds on every start), and the tasks carry caller keys, so running it again returns
the same tasks instead of new ones."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model

from console.dev.demo.logins import DEMO_OPERATOR
from runtime.errors import PoolExists
from runtime.limits.services import pool_create
from runtime.models import Pool
from runtime.tasks.services import task_submit

DEMO_TENANT = "demo"

POOLS = {
    "research": {"max_running": 4, "max_queued": 200},
    "notifications": {"max_running": 2, "max_queued": 50},
}

TASKS = [
    ("demo-research-1", "research.batch",
     {"question": "Which learning rate schedule converges fastest?", "experiments": 4, "overnight_seconds": 20}),
    ("demo-notify-1", "notify.send",
     {"to": "oncall@example.com", "message": "The overnight research batch has started."}),
]


def seed_demo(*, actor: str) -> list[str]:
    lines = [_operator()]
    for name, limits in POOLS.items():
        try:
            lines.append(f"pool {pool_create(name=name, actor=actor, note='demo seed', **limits)} created")
        except PoolExists:
            lines.append(f"pool {Pool.objects.get(name=name)} kept")
    for key, agent, payload in TASKS:
        sub = task_submit(agent=agent, input=payload, tenant=DEMO_TENANT, owner="user:alice", actor=actor,
                          idempotency_key=key)
        lines.append(f"task {sub.task_id} {agent} [{sub.status}]{'' if sub.created else ' (already seeded)'}")
    return lines


def _operator() -> str:
    """A demo operator for the admin, only in DEBUG (never in a production deploy)."""
    if not settings.DEBUG:
        return "no demo operator (STEWARD_DEBUG is off)"
    username, password = DEMO_OPERATOR
    users = get_user_model().objects
    if not users.filter(username=username).exists():
        users.create_superuser(username=username, email=f"{username}@example.com", password=password)
    return f"operator {username} / {password} (demo only)"
