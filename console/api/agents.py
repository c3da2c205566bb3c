"""The registered agents, each with its pool and the JSON Schema of its input."""

from __future__ import annotations

from typing import Any

from ninja import Router, Schema
from pydantic import Field

from console.api.errors import refuses
from console.api.schemas import PathName
from runtime.errors import UnknownAgent
from runtime.tasks.selectors import agent_get, agent_list

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
