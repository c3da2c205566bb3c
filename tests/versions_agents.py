"""Registers the versions tests' agents, old and new versions both, as a process that
serves both does (tests/versions_code.py holds their code)."""

import contextlib
import dataclasses

from runtime import agents
from runtime.agents import agent
from tests.versions_code import patched_before, reorder_v1, reorder_v2

agent("v.reorder", version="1")(reorder_v1)
agent("v.reorder", version="2")(reorder_v2)  # current: registered last
agent("v.patched", version="1")(patched_before)


@contextlib.contextmanager
def deployed(name: str, *versions):
    """This process serves exactly `versions` of agent `name`, (version, fn) pairs, the
    last current: a deploy, as the registry sees it."""
    saved_versions, saved_registry = dict(agents._versions), dict(agents._registry)
    base = saved_registry[name]
    for key in [key for key in agents._versions if key[0] == name]:
        del agents._versions[key]
    for version, fn in versions:
        spec = dataclasses.replace(base, fn=fn, version=version)
        agents._versions[(name, version)] = spec
        agents._registry[name] = spec
    agents._served.clear()
    try:
        yield
    finally:
        agents._versions.clear()
        agents._versions.update(saved_versions)
        agents._registry.clear()
        agents._registry.update(saved_registry)
        agents._served.clear()
