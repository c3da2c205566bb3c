"""Reads for the CLI, the API and the console. Nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass

from runtime import db
from runtime.audit import chain_for
from runtime.errors import TaskNotFound
from runtime.models import Attempt, AuditEvent, Effect, Pool, Step, Task


@dataclass
class TaskDetail:
    task: Task
    attempts: list[Attempt]
    steps: list[Step]
    effects: list[Effect]
    children: list[Task]
    audit: list[AuditEvent]


def task_get(task_id) -> Task:
    try:
        task = Task.objects.filter(id=task_id).first()
    except Exception:  # noqa: BLE001 - a malformed UUID is not found, not a crash
        task = None
    if task is None:
        raise TaskNotFound(f"no task {task_id}", task=str(task_id))
    return task


def task_detail(task_id, *, step_limit: int = 200, audit_limit: int = 200) -> TaskDetail:
    task = task_get(task_id)
    return TaskDetail(
        task=task,
        attempts=list(task.attempts.order_by("epoch")),
        steps=list(task.steps.order_by("-seq")[:step_limit])[::-1],
        effects=list(task.effects.order_by("step_seq")),
        children=list(task.children.order_by("created_at")),
        audit=list(AuditEvent.objects.filter(chain=chain_for(task_id=task.id, tenant=task.tenant))
                   .order_by("-id")[:audit_limit])[::-1],
    )


def task_list(*, status: str | None = None, agent: str | None = None, tenant: str | None = None,
              pool: str | None = None, limit: int = 50) -> list[Task]:
    tasks = Task.objects.all()
    if status:
        tasks = tasks.filter(status=status)
    if agent:
        tasks = tasks.filter(agent=agent)
    if tenant:
        tasks = tasks.filter(tenant=tenant)
    if pool:
        tasks = tasks.filter(pool_id=pool)
    return list(tasks.order_by("-created_at")[:limit])


def effect_list(*, task_id=None, state: str | None = None, limit: int = 50) -> list[Effect]:
    effects = Effect.objects.all()
    if task_id:
        effects = effects.filter(task_id=task_get(task_id).id)
    if state:
        effects = effects.filter(state=state)
    return list(effects.order_by("-created_at")[:limit])


@dataclass
class PoolUsage:
    pool: Pool
    running: int
    queued: int
    slots_held: int


def pool_usage(*, after: str = "", limit: int = 1000) -> list[PoolUsage]:
    """Pools by name with their usage, read from kept counts and held slots
    (runtime/sql/pool_usage.sql): the cost follows the number of pools, not tasks."""
    usage = []
    for name, max_running, max_queued, created_at, admitted, running, held in db.fetchall(
            "pool_usage", {"after": after, "limit": limit}):
        pool = Pool(name=name, max_running=max_running, max_queued=max_queued, created_at=created_at)
        usage.append(PoolUsage(pool, running, admitted - running, held))
    return usage
