"""Isolated agents (`@agent(..., isolation="process")`): the agent's code runs in a
sandboxed child process and reaches Steward only over a pipe (docs/adr/0036-isolated-agents.md).

Nothing here may import Django or anything that does: child.py and protocol.py are
imported inside the sandbox, which holds only the Python standard library, this package
and the agent's own module.
"""
