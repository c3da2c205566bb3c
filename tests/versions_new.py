"""A worker of the new deploy: `v.reorder` version 2 only (tests/versions_code.py)."""

from runtime.agents import agent
from tests.versions_code import reorder_v2

agent("v.reorder", version="2")(reorder_v2)
