"""Operators' acts on agent versions (docs/adr/0037-agent-versions.md): moving a task to
another version of its agent (an upgrade, refused unless its journal replays there),
and retiring a version no unfinished task runs.

Runs in the process that serves the version it upgrades to (the API's, the console's or
the CLI's load the same agent modules as the workers): the dry replay runs the new code
there, in a read-only transaction, and nothing else (runtime/worker/replay.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from runtime import agents, arguments, db, states
from runtime.attempts import dispatch
from runtime.audit import AuditKind, audit_append
from runtime.errors import (
    TaskNotUpgradable,
    UnknownAgent,
    UpgradeDoesNotReplay,
    UpgradeRaced,
    VersionInUse,
    VersionNotServed,
)
from runtime.models import RetiredVersion, Task
from runtime.tasks.selectors import task_get
from runtime.worker.replay import dry_replay

# Between attempts: what an upgrade moves. A running task is on its version's code right
# now; a stopping one is left to its stop; a finished one never runs again.
UPGRADABLE = (states.QUEUED, states.SLEEPING, states.WAITING, states.BLOCKED)
SYSTEM_TENANT = "system"  # the audit chain of fleet-wide acts (a version is not a tenant's)


@dataclass(frozen=True)
class Upgrade:
    task_id: object
    from_version: str | None  # None: it had not started (no version fixed yet)
    to_version: str
    replayed: int  # journal rows the new version asked for, in order


@db.reads("task_upgrade")
@dataclass(frozen=True, slots=True)
class _Upgraded:
    id: object  # the task, when the write won


def _spec(agent: str, version: str) -> agents.AgentSpec:
    try:
        return agents.get(agent, version)
    except UnknownAgent:
        raise VersionNotServed(
            f"agent {agent!r} version {version!r} is not deployed here: upgrade where it is",
            agent=agent,
            version=version,
        ) from None


def task_upgrade(*, task_id, tenant: str, version: str | None = None, actor: str) -> Upgrade:
    """Move one task to another version of its agent.

    1. The task (of `tenant`) must be between attempts (TASK_NOT_UPGRADABLE), and the
       version (default: the current one here) served here (VERSION_NOT_SERVED).
    2. Dry-replay its journal on that version (runtime/worker/replay.py): a divergence
       refuses it with UPGRADE_DOES_NOT_REPLAY, and nothing changes.
    3. One conditional write, with its audit row: only if no attempt claimed it and no
       other upgrade moved it since it was read (UPGRADE_RACED otherwise)."""
    arguments.tenant(tenant)
    arguments.actor(actor)
    task = task_get(task_id, tenant=tenant)
    spec = _spec(task.agent, version) if version else agents.get(task.agent)
    if task.status not in UPGRADABLE:
        raise TaskNotUpgradable(
            f"task {task.id} is {task.status}: only a task between attempts moves to another version",
            task=str(task.id),
            status=task.status,
        )
    if spec.version == task.agent_version:
        return Upgrade(task.id, task.agent_version, spec.version, 0)  # there already: nothing to do
    replay = dry_replay(task=task, spec=spec)
    if not replay.ok:
        raise UpgradeDoesNotReplay(
            f"task {task.id}'s journal does not replay on {task.agent} version {spec.version}: {replay.why}",
            task=str(task.id),
            version=spec.version,
            matched=replay.matched,
            journaled=replay.journaled,
        )
    with transaction.atomic(durable=True):
        won = db.fetchone(
            "task_upgrade",
            {
                "statuses": list(UPGRADABLE),
                "task": task.id,
                "tenant": tenant,
                "epoch": task.epoch,
                "from": task.agent_version,
                "to": spec.version,
            },
            row=_Upgraded,
        )
        if won is None:
            # An attempt claimed it (its epoch moved), another upgrade won, or a stop began.
            raise UpgradeRaced(f"task {task.id} moved on while its journal was replayed: try again", task=str(task.id))
        audit_append(
            actor=actor,
            tenant=task.tenant,
            kind=AuditKind.TASK_UPGRADED,
            task_id=task.id,
            data={"from": task.agent_version, "to": spec.version, "epoch": task.epoch, "replayed": replay.matched},
        )
    if task.status == states.QUEUED:
        dispatch.pool_has_work(task.pool_id)  # a worker of the new version claims it now
    return Upgrade(task.id, task.agent_version, spec.version, replay.matched)


@dataclass
class Upgrades:
    upgraded: list[Upgrade] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # task id -> stable code


def version_upgrade(*, agent: str, from_version: str, tenant: str, version: str | None = None, actor: str) -> Upgrades:
    """Move every task of `tenant` on `agent` `from_version` that is between attempts to
    `version` (default: the current one here), one task_upgrade each: a task whose
    journal does not replay stays where it was, and is named with its code."""
    arguments.agent_name(agent)
    arguments.tenant(tenant)
    done = Upgrades()
    ids = Task.objects.filter(tenant=tenant, agent=agent, agent_version=from_version, status__in=UPGRADABLE)
    for task_id in ids.order_by("id").values_list("id", flat=True):
        try:
            done.upgraded.append(task_upgrade(task_id=task_id, tenant=tenant, version=version, actor=actor))
        except (UpgradeDoesNotReplay, UpgradeRaced, TaskNotUpgradable) as exc:
            done.refused[str(task_id)] = exc.code
    return done


def version_retire(*, agent: str, version: str, actor: str) -> bool:
    """Retire `agent` `version`: no task is submitted under it again. Refused with
    VERSION_IN_USE while any unfinished task (of any tenant) runs it. Returns False when
    it was retired already.

    Against a first claim that would fix the version (runtime/sql/claim.sql), or a submit
    that names it: this takes the version's lock exclusively before it looks for tasks,
    and steward_version_open() and steward_submit() take it shared before they look for
    the retirement, so one of them sees the other (runtime/sql/version_lock.sql)."""
    arguments.agent_name(agent)
    arguments.actor(actor)
    with transaction.atomic(durable=True):
        db.execute("version_lock", {"agent": agent, "version": version})
        live = Task.objects.filter(agent=agent, agent_version=version).exclude(status__in=states.TERMINAL)
        left = live.count()
        if left:
            raise VersionInUse(
                f"agent {agent!r} version {version!r} still has {left} unfinished task(s)",
                agent=agent,
                version=version,
                tasks=left,
            )
        _, created = RetiredVersion.objects.get_or_create(agent=agent, version=version, defaults={"actor": actor})
        if created:
            audit_append(
                actor=actor,
                tenant=SYSTEM_TENANT,
                kind=AuditKind.VERSION_RETIRED,
                data={"agent": agent, "version": version},
            )
        return created
