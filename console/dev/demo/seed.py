"""`manage.py seed_demo`: the demo's tenants and people, pools and tasks, grants and
stewards. `make run` seeds on every start, so seeding again must never undo what a
person did since:

* it acts as the seed (`system:seed`, runtime/authz/patterns.py SEED), never in a
  person's name: every audit row it writes says so;
* a pool, a person, a membership or a grant that exists is kept as it is (an operator
  may have changed a pool's limits, a person's role, a grant's resource);
* what it made once and a person then changed or took away (a grant narrowed, revoked
  or removed; a membership or a steward right removed) it never makes again: it finds
  its own earlier rows, and people's changes, in the tenant's audit trail;
* the tasks carry caller keys, so seeding again returns the same tasks."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from console.access import agent_steward_seed, member_seed
from console.dev.demo.logins import DEMO_ADMIN, DEMO_PEOPLE, DEMO_TENANTS
from console.models import Membership, Tenant
from runtime.authz.services import SEED, grant_seed
from runtime.errors import PoolExists
from runtime.limits.services import pool_create
from runtime.models import Pool
from runtime.tasks.services import task_submit

POOLS = {
    "research": {"max_running": 4, "max_queued": 200},
    "notifications": {"max_running": 2, "max_queued": 50},
}

# (tenant, caller key, agent, input, owner[, version]): a version pins the task to it; by
# default its first claim fixes the worker's current one (docs/adr/0037-agent-versions.md).
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
        "demo-assistant-1",
        "research.assistant",
        {"prompt": "What do the lab notes say about warmup?"},
        "alice",
    ),
    (
        "acme",
        "demo-briefer-1",
        "research.briefer",
        {"prompt": "What do the lab notes say about cosine decay?"},
        "alice",
    ),
    # dave's too, so that the report's approval waits in alice's inbox.
    (
        "acme",
        "demo-reporter-1",
        "research.reporter",
        {"prompt": "Warmup removed the early loss spikes."},
        "dave",
    ),
    (
        "acme",
        "demo-notify-1",
        "notify.send",
        {"to": "oncall@example.com", "message": "The overnight research batch has started."},
        "alice",
    ),
    # Two versions of one agent at once: the first pinned to the old version 1, which the
    # workers still serve and an operator may upgrade to 2 from its page while it sleeps.
    ("acme", "demo-digest-v1", "research.digest", {"topic": "optimizers", "overnight_seconds": 900}, "alice", "1"),
    ("acme", "demo-digest-v2", "research.digest", {"topic": "schedulers", "overnight_seconds": 900}, "alice"),
    (
        "globex",
        "demo-research-2",
        "research.batch",
        {"question": "Does batch size change the final loss?", "experiments": 3, "overnight_seconds": 30},
        "carol",
    ),
]


# (tenant, principal, action, resource), given by the seed. The demo agents do not call
# authorize() yet: these give the agents, grants and decisions screens something to
# show, and the narrow and revoke journeys something to change.
GRANTS = [
    ("acme", "agent:research.batch", "model.call", "model:*"),
    ("acme", "agent:research.batch", "tool.search", "repo:acme/*"),
    ("acme", "agent:research.experiment", "model.call", "model:*"),
    ("acme", "agent:research.assistant", "model.call", "model:*"),
    ("acme", "agent:research.reporter", "model.call", "model:*"),
    ("acme", "agent:research.briefer", "model.call", "model:*"),
    ("acme", "agent:notify.send", "http.post", "notify:oncall@example.com"),
    ("acme", "user:alice", "model.call", "model:*"),
    ("acme", "user:dave", "model.call", "model:*"),  # research.reporter runs as dave's
    ("acme", "user:alice", "tool.search", "repo:*"),
    ("acme", "user:alice", "http.post", "notify:*"),
    ("globex", "agent:research.batch", "model.call", "model:*"),
    ("globex", "user:carol", "model.call", "model:*"),
]
# alice (operator of acme) may change research.batch's grants there: a guardian right.
STEWARDS = [("acme", "research.batch", "alice")]


def seed_demo() -> list[str]:
    lines = _people()
    if settings.DEBUG:
        lines += _authority()
    for name, limits in POOLS.items():
        try:
            lines.append(f"pool {pool_create(name=name, actor=SEED, note='demo seed', **limits)} created")
        except PoolExists:
            lines.append(f"pool {Pool.objects.get(name=name)} kept")
    for tenant, key, agent, payload, owner, *version in TASKS:
        sub = task_submit(
            agent=agent,
            input=payload,
            tenant=tenant,
            owner=f"user:{owner}",
            actor=SEED,
            idempotency_key=key,
            version=version[0] if version else None,
        )
        lines.append(f"task {sub.task_id} {agent} [{sub.status}]{'' if sub.created else ' (already seeded)'}")
    return lines


def _people() -> list[str]:
    """The demo's tenants and people, only in DEBUG (never in a production deploy). A
    membership is made once (member_seed): one an admin removed or changed stays so."""
    if not settings.DEBUG:
        return ["no demo people (STEWARD_DEBUG is off)"]
    users = get_user_model().objects
    for slug, name in DEMO_TENANTS.items():
        Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    lines = []
    for username, (tenant, role, password) in DEMO_PEOPLE.items():
        if not users.filter(username=username).exists():
            users.create_user(username=username, email=f"{username}@example.com", password=password)
        member_seed(tenant=tenant, username=username, role=role)
        membership = Membership.objects.filter(user__username=username, tenant_id=tenant).first()
        lines.append(
            f"person {username} / {password}: "
            + (f"{membership.role} of {tenant}" if membership else f"no longer a member of {tenant}")
            + " (demo only)"
        )
    username, password = DEMO_ADMIN
    if not users.filter(username=username).exists():
        users.create_superuser(username=username, email=f"{username}@example.com", password=password)
    lines.append(f"admin {username} / {password}: the Django admin (demo only)")
    return lines


def _authority() -> list[str]:
    """The demo's grants and stewards, each given once, as the seed (grant_seed,
    agent_steward_seed): one a person narrowed, revoked or removed since is never given
    again, nor anything beside it that would widen it. dave may also use the Django
    admin's grant actions."""
    made = sum(
        grant_seed(tenant=tenant, principal=principal, action=action, resource=resource) is not None
        for tenant, principal, action, resource in GRANTS
    )
    for tenant, agent_name, username in STEWARDS:
        agent_steward_seed(tenant=tenant, name=agent_name, username=username)
    users = get_user_model().objects
    dave = users.get(username="dave")
    if not dave.is_staff:
        dave.is_staff = True
        dave.save(update_fields=["is_staff"])
    dave.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="runtime", codename__in=["view_grant", "view_task", "view_auditevent"]
        )
    )
    return [
        f"grants: {made} given, {len(GRANTS) - made} kept as they are; alice may change research.batch's grants in acme"
    ]
