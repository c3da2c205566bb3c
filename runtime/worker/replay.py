"""The dry replay: does a task's journal so far replay on another version of its agent?
(docs/adr/0037-agent-versions.md; an upgrade asks, runtime/versions/services.py.)

It runs the agent's code with a Context in dry mode against the recorded journal: each
call is matched against the journal row at its seq (name and kind) and answered with
what was recorded, exactly as a real replay does, and the replay stops at the first
call past the journal (DryReplayReached), or at a sleep, wait or approval that is the
journal's last row, whose replay would go on waiting. Nothing runs: no step function,
no effect, no model or tool call (their journaled answers are returned). Nothing is
written either: it all runs in a READ ONLY transaction that is rolled back, so agent
code that writes between its steps fails the replay instead of changing anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from runtime import db
from runtime.agents import AgentSpec
from runtime.attempts import journal
from runtime.attempts.lease import Lease
from runtime.errors import DryReplayReached, InfrastructureError, NondeterminismError
from runtime.models import Task
from runtime.worker.context import Context

DRY_WORKER = "dry-replay"


@dataclass(frozen=True)
class Replayed:
    ok: bool
    matched: int  # journal rows the new code asked for, in order
    journaled: int  # rows in the journal
    why: str = ""  # when not ok: where and how it diverged


def dry_replay(*, task: Task, spec: AgentSpec) -> Replayed:
    """Replay `task`'s journal on `spec` (another version of its agent), without side effects."""
    rows = journal.load(task.id)
    lease = Lease(task.id, task.epoch, task.tenant, task.pool_id, task.parent_id, DRY_WORKER, 0)
    ctx = Context(
        lease, agent=task.agent, owner=task.owner, root_id=task.root_id, reason="upgrade", journal_rows=rows, dry=True
    )
    with transaction.atomic():
        db.execute("read_only", prepare=False)
        try:
            spec.fn(ctx, task.input)
        except DryReplayReached:
            return Replayed(True, ctx.replayed, len(rows))
        except NondeterminismError as exc:
            return Replayed(False, ctx.replayed, len(rows), str(exc))
        except (InfrastructureError, *db.CONNECTION_ERRORS):
            raise  # the database, not the code: no answer either way
        except BaseException as exc:  # the new code fails (or tries to write) where the old one went on
            return Replayed(False, ctx.replayed, len(rows), f"the replay raised {type(exc).__name__}: {exc}"[:500])
        finally:
            transaction.set_rollback(True)
        if ctx.replayed < len(rows):
            return Replayed(
                False,
                ctx.replayed,
                len(rows),
                f"the new code returns after {ctx.replayed} of the journal's {len(rows)} steps",
            )
        return Replayed(True, ctx.replayed, len(rows))
