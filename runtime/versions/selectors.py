"""What operators read about agent versions (docs/adr/0037-agent-versions.md): a tenant's
unfinished tasks per agent version, which live workers serve which versions, and which
versions this process has, which is current and which are retired."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count

from runtime import agents, states
from runtime.models import RetiredVersion, Step, Task
from runtime.tasks.selectors import live_workers
from runtime.worker.context import PATCH_PREFIX


@dataclass
class VersionRow:
    agent: str
    # "": tasks submitted before versions; None: tasks not started yet, whose first claim
    # fixes the claiming worker's current version.
    version: str | None
    tasks: dict[str, int] = field(default_factory=dict)  # unfinished tasks by status
    workers: list[str] = field(default_factory=list)  # live workers that serve it
    current: bool = False  # new tasks submitted here run it
    retired: bool = False

    @property
    def unfinished(self) -> int:
        return sum(self.tasks.values())

    @property
    def waiting(self) -> bool:
        """Unfinished tasks that no live worker serves: they wait for a worker of it (for
        tasks not started yet, of any version of the agent: version_overview fills
        `workers` with every live worker of the agent for that row)."""
        return self.version != "" and self.unfinished > 0 and not self.workers


def version_overview(*, tenant: str, agent: str | None = None) -> list[VersionRow]:
    """Every (agent, version) that has unfinished tasks in `tenant`, is served by a live
    worker, or is registered here, sorted by agent then version; `agent` narrows it."""
    rows: dict[tuple[str, str | None], VersionRow] = {}

    def row(name: str, version: str | None) -> VersionRow:
        return rows.setdefault((name, version), VersionRow(name, version))

    tasks = Task.objects.filter(tenant=tenant, status__in=sorted(states.LIVE))
    if agent is not None:
        tasks = tasks.filter(agent=agent)
    for found in tasks.values("agent", "agent_version", "status").annotate(n=Count("id")).order_by():
        row(found["agent"], found["agent_version"]).tasks[found["status"]] = found["n"]
    for process in live_workers().only("name", "versions").order_by("name"):
        for name, versions in (process.versions or {}).items():
            if agent is None or name == agent:
                for version in versions:
                    row(name, version).workers.append(process.name)
                if (name, None) in rows:  # any of its workers starts a task not started yet
                    rows[(name, None)].workers.append(process.name)
    for spec in agents.registered():
        if agent is None or spec.name == agent:
            for served in agents.versions_of(spec.name):
                row(spec.name, served.version).current = served is spec
    retired = RetiredVersion.objects.all() if agent is None else RetiredVersion.objects.filter(agent=agent)
    for gone in retired:
        if (gone.agent, gone.version) in rows:
            rows[(gone.agent, gone.version)].retired = True
    # Per agent: not started first, then "" (before versions), then by version.
    return [rows[key] for key in sorted(rows, key=lambda k: (k[0], k[1] is not None, k[1] or ""))]


def patch_holdouts(*, tenant: str, agent: str, name: str) -> dict[str, int]:
    """For retiring a patch's old path: unfinished tasks of `agent` in `tenant` that have
    the marker of patch `name` in their journal (`marked`: they took its new path) and
    those that have not (`unmarked`: started before it; they may still need the old path).
    ctx.deprecate_patch() is safe to deploy once `unmarked` is 0, and the call may go once
    `marked` is 0 too."""
    live = Task.objects.filter(tenant=tenant, agent=agent, status__in=sorted(states.LIVE))
    marked_ids = Step.objects.filter(task__in=live, kind=states.StepKind.PATCH, name=PATCH_PREFIX + name).values(
        "task_id"
    )
    marked = live.filter(id__in=marked_ids).count()
    return {"marked": marked, "unmarked": live.count() - marked}
