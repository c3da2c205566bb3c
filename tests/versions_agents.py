"""Registers the versions tests' agents, old and new versions both, as a process that
serves both does (tests/versions_code.py holds their code)."""

from runtime.agents import agent
from tests.versions_code import patched_before, reorder_v1, reorder_v2

agent("v.reorder", version="1")(reorder_v1)
agent("v.reorder", version="2")(reorder_v2)  # current: registered last
agent("v.patched", version="1")(patched_before)
