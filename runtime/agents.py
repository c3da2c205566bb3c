"""Registering agents. An agent is a plain Python function `fn(ctx, input) -> output`,
registered by name; `ctx` (runtime.worker.context.Context) is its only way to do
nondeterministic or outside work.

    from runtime.agents import agent

    @agent("demo.notify", pool="notifications")
    def notify(ctx, input):
        ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime import arguments, config
from runtime.errors import StewardError, UnknownAgent


@dataclass(frozen=True)
class AgentSpec:
    name: str
    fn: Callable[..., Any]
    pool: str | None
    description: str
    # An optional pydantic model class (`@agent(..., input=Model)`): every submission,
    # from the API, the console or the CLI, is validated against it (task_submit).
    input_model: Any = None
    # Its breaker limits (`@agent(..., breakers={"max_steps": 500})`), over the fleet's
    # (settings STEWARD["BREAKERS"]) and under an operator's override of one task's.
    breakers: dict = field(default_factory=dict)
    # None: the agent runs in the worker's process, as the deployer's own code. "process":
    # in a sandboxed child process that reaches Steward only over a pipe
    # (runtime/worker/isolation/, docs/adr/0036-isolated-agents.md), for untrusted code.
    isolation: str | None = None


_registry: dict[str, AgentSpec] = {}


ISOLATIONS = (None, "process")


def agent(
    name: str,
    *,
    pool: str | None = None,
    description: str = "",
    input=None,
    breakers: dict | None = None,
    isolation: str | None = None,
):
    """Register `fn` as the agent `name`. Names are stable identifiers: tasks record
    them, so renaming an agent strands its running tasks. `input` is a pydantic model
    class that every submitted input must fit; its JSON Schema is what the API and the
    console show. `breakers`: limits of runtime/arguments.py BREAKER_LIMITS for its tasks
    (max_children, max_depth, max_spawns_per_minute, max_steps, max_wall_clock_seconds).
    `isolation="process"`: run its code in a sandbox (no secrets, no network, a read-only
    file system), every ctx call over a pipe; for agents that run model-written code."""
    # No "/": an agent has a page of its own, /agents/<name>/ in the console and the API,
    # and a name with a slash could be neither linked to nor routed.
    if not isinstance(name, str) or not name or len(name) > 200 or not name.isprintable() or "/" in name:
        raise ValueError("agent names are 1-200 printable characters, with no '/'")
    if pool is not None:
        arguments.pool_name(pool)  # a declared pool is created on first use, so it must be a valid name

    if input is not None and not hasattr(input, "model_validate"):
        raise ValueError(f"agent {name!r}: input must be a pydantic model class, got {input!r}")
    if isolation not in ISOLATIONS:
        raise ValueError(f"agent {name!r}: isolation must be one of {ISOLATIONS}, got {isolation!r}")
    input_model = input
    try:  # refused at import, loudly, like a bad pool name
        limits = arguments.breaker_limits(breakers or {}, "breakers")
    except StewardError as exc:
        raise ValueError(f"agent {name!r}: {exc}") from None

    def register(fn):
        existing = _registry.get(name)
        if existing is not None and existing.fn is not fn:
            raise ValueError(f"agent {name!r} is already registered by {existing.fn.__module__}")
        _registry[name] = AgentSpec(
            name, fn, pool, description or (fn.__doc__ or "").strip(), input_model, limits, isolation
        )
        return fn

    return register


def get(name: str) -> AgentSpec:
    try:
        return _registry[name]
    except KeyError:
        raise UnknownAgent(f"no agent is registered as {name!r}", agent=name, known=sorted(_registry)) from None


def registered() -> list[AgentSpec]:
    return [_registry[name] for name in sorted(_registry)]


def load_agent_modules() -> None:
    for module in config.agent_modules():
        importlib.import_module(module)
