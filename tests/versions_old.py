"""A worker of the old deploy: `v.reorder` version 1 only (tests/versions_code.py)."""

from runtime.agents import agent
from tests.versions_code import reorder_v1

agent("v.reorder", version="1")(reorder_v1)
