"""A worker of the patched deploy: `v.patched` version 1 still, with `ctx.patched("x")`
(tests/versions_code.py patched_after)."""

from runtime.agents import agent
from tests.versions_code import patched_after

agent("v.patched", version="1")(patched_after)
