"""A worker of the deploy before the patch: `v.patched` version 1, unpatched
(tests/versions_code.py patched_before)."""

from runtime.agents import agent
from tests.versions_code import patched_before

agent("v.patched", version="1")(patched_before)
