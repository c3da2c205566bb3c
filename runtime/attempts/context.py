"""What the packages below the worker read of the context an agent holds.

runtime/worker/context.py's Context is the one implementation; the effect ledger, the
gateway's client and approvals take a `Context` of this protocol, so they depend on the
attempt's identity and lease (this layer), never on the worker above them. Each call
they make on the agent's behalf arrives with its JournalCall (runtime/attempts/journal.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from runtime.attempts.lease import Lease


class Context(Protocol):
    """The attempt an agent's call runs in: its lease (every write is fenced on it) and
    who it runs for."""

    lease: Lease
    task_id: object  # the task's uuid.UUID, as Lease.task_id
    tenant: str
    owner: str
    agent: str
    epoch: int
    root_id: Any
