"""The registered agents, each with its pool and the JSON Schema of its input."""

from __future__ import annotations

from typing import Any

from ninja import Router, Schema
from pydantic import Field

from console.api.auth import operating, principal
from console.api.errors import refuses
from console.api.schemas import Body, PathName
from runtime.errors import Forbidden, InvalidArgument, UnknownAgent, VersionNotServed
from runtime.tasks.selectors import agent_get, agent_list
from runtime.versions.selectors import version_overview
from runtime.versions.services import version_upgrade

router = Router(tags=["agents"])


class AgentOut(Schema):
    name: str
    pool: str = Field(description="the pool its tasks are admitted to unless a submit names another")
    description: str
    input_schema: dict[str, Any] | None = Field(description="JSON Schema its input must fit; null: any JSON object")


def agent_out(info) -> dict:
    return {"name": info.name, "pool": info.pool, "description": info.description, "input_schema": info.input_schema}


@router.get("/agents", response={200: list[AgentOut]}, summary="The registered agents")
def list_agents(request):
    """The agents this web process registers (STEWARD_AGENT_MODULES, the workers' list)."""
    return [agent_out(info) for info in agent_list()]


@router.get("/agents/{name}", response={200: AgentOut}, summary="One agent and its input schema")
@refuses(UnknownAgent)
def detail(request, name: PathName):
    """An unregistered name is UNKNOWN_AGENT (422), as on submit."""
    return agent_out(agent_get(name))


class VersionOut(Schema):
    agent: str
    version: str | None = Field(
        description="'': tasks submitted before versions; null: tasks not started yet (their first claim fixes one)"
    )
    tasks: dict[str, int] = Field(description="this tenant's unfinished tasks on it, by status")
    workers: list[str] = Field(description="live worker processes that serve it")
    current: bool = Field(description="new tasks submitted through this API run it")
    retired: bool = Field(description="retired: nothing is submitted under it again (steward retire-version)")
    waiting: bool = Field(description="it has unfinished tasks and no live worker serves it: they wait for one")


class VersionUpgrade(Body):
    to: str | None = Field(None, max_length=64, description="the version; default: the current one")


class VersionUpgraded(Schema):
    upgraded: list[str] = Field(description="the tasks moved")
    refused: dict[str, str] = Field(description="task id -> code: UPGRADE_DOES_NOT_REPLAY, UPGRADE_RACED, ...")


@router.get(
    "/agents/{name}/versions",
    response={200: list[VersionOut]},
    summary="An agent's versions: unfinished tasks per version, and the live workers serving each",
)
@refuses(UnknownAgent)
def versions(request, name: PathName):
    agent_get(name)
    return [
        {
            "agent": row.agent,
            "version": row.version,
            "tasks": row.tasks,
            "workers": row.workers,
            "current": row.current,
            "retired": row.retired,
            "waiting": row.waiting,
        }
        for row in version_overview(tenant=principal(request).tenant, agent=name)
    ]


@router.post(
    "/agents/{name}/versions/{version}/upgrade",
    response={200: VersionUpgraded},
    summary="Move every task of one version that replays on another (each by a dry replay)",
)
@refuses(Forbidden, UnknownAgent, VersionNotServed, InvalidArgument)
def upgrade_version(request, name: PathName, version: str, body: VersionUpgrade | None = None):
    """Only this tenant's tasks between attempts; a task whose journal does not replay on
    the new code stays where it was, named in `refused` with its code."""
    body = body or VersionUpgrade()
    agent_get(name)
    with operating(request) as who:
        done = version_upgrade(agent=name, from_version=version, tenant=who.tenant, version=body.to, actor=who.actor)
    return {"upgraded": [str(u.task_id) for u in done.upgraded], "refused": done.refused}
