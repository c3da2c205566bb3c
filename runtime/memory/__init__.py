"""Agent memory (issue 25, docs/adr/0039-agent-memory.md): records of a declared kind,
kept per (tenant, agent), versioned, with provenance and taint, validity windows,
upgrades and rollbacks.

- kinds.py: `@memory_kind(name, version=N)` on a pydantic model, `@memory_upgrade(name,
  from_version=N)` on a function from version N's payload to N+1's.
- agent.py: `ctx.memory` (get, put, history), each call a journal step.
- services.py: the writes (an agent's, a person's, an upgrade, a rollback), each a
  compare-and-set with its audit row.
- selectors.py: the reads for the CLI, the API and the console.
"""
