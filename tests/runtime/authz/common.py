"""Tasks and grants for the authority tests: a task of agent t.steps owned by alice in
acme, children below it, and grants given by dave (an admin of acme)."""

from __future__ import annotations

from runtime.authz.services import grant_create
from runtime.models import Task
from runtime.tasks.services import insert_task, task_submit

ADMIN = "user:dave"
OWNER = "user:alice"
AGENT = "t.steps"


def task(*, tenant: str = "acme", owner: str = OWNER, agent: str = AGENT):
    return task_submit(agent=agent, input={}, tenant=tenant, owner=owner, actor=owner).task_id


def running_task(**kwargs):
    """task(), as if a worker ran it (status running, its epoch still 0): a capability
    token is good only while its task runs (runtime/sql/authz_decide.sql, task_stopped).
    queued -> running keeps the pool's kept admission count (it counts both)."""
    made = task(**kwargs)
    Task.objects.filter(id=made).update(status="running")
    return made


def child(parent_id, *, agent: str = AGENT, requested_scope=None, spawn_seq: int = 1):
    """A child of `parent_id` as the executor spawns one (same tenant and owner), asking
    for `requested_scope` (None: whatever the parent holds)."""
    parent = Task.objects.get(id=parent_id)
    made = insert_task(
        agent=agent,
        input_text="{}",
        digest=f"child-{spawn_seq}-{parent_id}",
        tenant=parent.tenant,
        owner=parent.owner,
        pool=parent.pool_id,
        actor=f"task:{parent_id}",
        parent_id=parent.id,
        root_id=parent.root_id or parent.id,
        spawn_seq=spawn_seq,
    )
    if requested_scope is not None:
        Task.objects.filter(id=made.task_id).update(requested_scope=requested_scope)
    return made.task_id


def give(
    principal: str, action: str = "tool.search", resource: str = "repo:acme/*", *, tenant: str = "acme", expires_at=None
):
    return grant_create(
        tenant=tenant,
        principal=principal,
        action=action,
        resource=resource,
        expires_at=expires_at,
        actor=ADMIN if tenant == "acme" else "user:carol",
    )


def give_both(
    action: str = "tool.search",
    resource: str = "repo:acme/*",
    *,
    agent: str = AGENT,
    owner: str = OWNER,
    tenant: str = "acme",
):
    return (give(f"agent:{agent}", action, resource, tenant=tenant), give(owner, action, resource, tenant=tenant))
