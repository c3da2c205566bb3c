"""Registering agents. An agent is a plain Python function `fn(ctx, input) -> output`,
registered by name; `ctx` (runtime.worker.context.Context) is its only way to do
nondeterministic or outside work.

    from runtime.agents import agent

    @agent("demo.notify", pool="notifications")
    def notify(ctx, input):
        ...
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
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
    # The version of its code (docs/adr/0037-agent-versions.md): the declared `version=`,
    # or else a digest of its module's source. A task records the version it started on
    # (its first claim fixes it) and is claimed after that only by a worker that serves it.
    version: str = ""


_registry: dict[str, AgentSpec] = {}  # name -> the current spec: tasks this process starts run it
# (name, version) -> spec: every version this process serves. A deploy can keep an old
# version registered (declared `version=`, registered before the new one) so that the
# tasks that started on it finish on it.
_versions: dict[tuple[str, str], AgentSpec] = {}

VERSION_MAX = 64


ISOLATIONS = (None, "process")


def code_version(fn: Callable[..., Any]) -> str:
    """A digest of the source of the module that defines `fn` (its code, when no version
    is declared): any edit to the module is a new version, which is safe but coarse."""
    module = sys.modules.get(fn.__module__)
    try:
        source = inspect.getsource(module) if module is not None else inspect.getsource(fn)
    except (OSError, TypeError):
        source = getattr(fn, "__qualname__", repr(fn))  # no source (a REPL): its name
    return "h-" + hashlib.sha256(source.encode()).hexdigest()[:16]


def agent(
    name: str,
    *,
    pool: str | None = None,
    description: str = "",
    input=None,
    breakers: dict | None = None,
    isolation: str | None = None,
    version: str | None = None,
):
    """Register `fn` as the agent `name`. Names are stable identifiers: tasks record
    them, so renaming an agent strands its running tasks. `input` is a pydantic model
    class that every submitted input must fit; its JSON Schema is what the API and the
    console show. `breakers`: limits of runtime/arguments.py BREAKER_LIMITS for its tasks
    (max_children, max_depth, max_spawns_per_minute, max_steps, max_wall_clock_seconds).
    `isolation="process"`: run its code in a sandbox (no secrets, no network, a read-only
    file system), every ctx call over a pipe; for agents that run model-written code.
    `version`: the version of its code (1-64 printable characters, no whitespace); by
    default a digest of its module's source. Several versions of one name may be
    registered in one process: each is served, and the last registered is current."""
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

    if version is not None and not _valid_version(version):
        raise ValueError(f"agent {name!r}: version must be 1-{VERSION_MAX} printable characters with no space")

    def register(fn):
        spec_version = version if version is not None else code_version(fn)
        existing = _versions.get((name, spec_version))
        if existing is not None and existing.fn is not fn:
            raise ValueError(
                f"agent {name!r} version {spec_version!r} is already registered by {existing.fn.__module__}"
            )
        spec = AgentSpec(
            name, fn, pool, description or (fn.__doc__ or "").strip(), input_model, limits, isolation, spec_version
        )
        _versions[(name, spec_version)] = spec
        _registry[name] = spec
        _served.clear()
        return fn

    return register


def _valid_version(version) -> bool:
    return (
        isinstance(version, str)
        and 0 < len(version) <= VERSION_MAX
        and version.isprintable()
        and not any(c.isspace() for c in version)
    )


# What served() returns: agents, versions, and whether each pair is its agent's current one.
Served = tuple[list[str], list[str], list[bool]]


def get(name: str, version: str | None = None) -> AgentSpec:
    """The current spec of `name`, or the spec of one version of it (`version`, as a task
    records it; "" for a task submitted before versions: the current one)."""
    try:
        if version:
            return _versions[(name, version)]
        return _registry[name]
    except KeyError:
        if name in _registry:
            raise UnknownAgent(
                f"agent {name!r} version {version!r} is not served here", agent=name, known=sorted(_registry)
            ) from None
        raise UnknownAgent(f"no agent is registered as {name!r}", agent=name, known=sorted(_registry)) from None


_served: dict[str, Served] = {}  # cache of served(): the registry is static once loaded


def served() -> Served:
    """The (agent, version) pairs this process serves, as parallel lists, with whether each
    is the current version of its agent (the one a first claim fixes a task to): what a
    worker advertises in its heartbeat and filters its claims by (runtime/sql/claim.sql)."""
    pairs = _served.get("pairs")
    if pairs is None:
        keys = sorted(_versions)
        pairs = _served["pairs"] = (
            [name for name, _ in keys],
            [version for _, version in keys],
            [_registry.get(name) is _versions[(name, version)] for name, version in keys],
        )
    return pairs


def versions_of(name: str) -> list[AgentSpec]:
    """Every version of `name` this process serves, the current one last."""
    current = _registry.get(name)
    others = [spec for (n, _), spec in sorted(_versions.items()) if n == name and spec is not current]
    return others + ([current] if current is not None else [])


def registered() -> list[AgentSpec]:
    return [_registry[name] for name in sorted(_registry)]


def load_agent_modules() -> None:
    for module in config.agent_modules():
        importlib.import_module(module)
