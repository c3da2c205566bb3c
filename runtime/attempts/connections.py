"""A dense worker's database connections: checked out per statement or per step
transaction, never held while agent code waits on I/O (docs/adr/0033-dense-worker.md).

A solo worker runs one attempt, and its thread keeps one connection for the attempt's
life, marked while agent code runs (runtime/sql/agent_code.sql). A dense worker runs
hundreds of attempts from one process, and each would hold a connection for minutes of
model streaming: so it hands its connection back to the process's pool (Django's
psycopg_pool, console/settings.py) each time the attempt's thread enters agent code, and
takes one again for its next statement.

The mark must still hold: every connection a thread takes while its attempt is in agent
code is marked as it is taken (Django's connection_created, sent on each checkout from
the pool), and unmarked before it goes back, so no other thread ever borrows a marked
connection (the lease keeper, the heartbeat, another attempt's own writes to budgets).
"""

from __future__ import annotations

import contextlib
import threading

from django.db import connection
from django.db.backends.signals import connection_created

from runtime import db

_local = threading.local()  # .task: the task whose agent code this thread runs ("" outside it)
_state = {"per_statement": False}


def enable() -> None:
    """Hand connections back between statements from now on (a dense worker process)."""
    _state["per_statement"] = True
    connection_created.connect(_mark_taken, dispatch_uid="steward-agent-code-mark")


def per_statement() -> bool:
    return _state["per_statement"]


@contextlib.contextmanager
def agent_code(task_id):
    """The calling thread runs `task_id`'s agent code: the connection it holds goes back
    unmarked now, and each one it takes until the block ends is marked."""
    hand_back()
    _local.task = str(task_id)
    try:
        yield
    finally:
        hand_back()  # unmarked on its way back; the executor's end writes take a fresh one
        _local.task = ""


def hand_back() -> None:
    """Return this thread's connection to the pool, unmarked, unless a transaction is
    open on it (a step's transaction keeps its connection to its commit)."""
    if not _state["per_statement"] or connection.connection is None or connection.in_atomic_block:
        return
    if getattr(_local, "task", ""):
        try:
            db.execute("agent_code", {"task": ""})
        except Exception:
            # It may still carry the mark: close it for good, so the pool discards it
            # rather than lend a marked connection to another thread.
            with contextlib.suppress(Exception):
                connection.connection.close()
    db.discard_connection()


def _mark_taken(sender, connection, **_) -> None:
    task = getattr(_local, "task", "")
    if task and connection.alias == "default":
        connection.connection.execute(db.sql("agent_code"), {"task": task})
