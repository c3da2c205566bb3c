"""Running attempts: claim, replay, run, end. Called by the thin Celery task
(runtime/worker/celery_tasks.py); nothing here depends on how the call arrived.

A worker that receives a wake-up for a pool claims the pool's oldest queued task and
runs it, then keeps claiming from the same pool until it is empty, it holds no free
slot, or its budget is spent. Draining this way hands a freed slot straight to the
next queued task without a broker round trip (docs/adr/0002-postgres-decides.md).

A lost database connection is never the agent's error. Wherever it strikes (the claim,
a step, an effect, the attempt's end) the attempt yields: the task goes back to the
queue with reason `retry`, or, if the database stays away, its lease lapses and the
supervisor recovers it. Either way the next attempt replays the journal and settles
any effect by its key (docs/faults.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from django.db import transaction

from runtime import agents, config, db, encoding, faults, outages, states
from runtime.attempts import connections, dispatch, interrupts, journal
from runtime.attempts.lease import Claim, claim_next, keeper
from runtime.attempts.transitions import end_attempt, fence, release_stopped
from runtime.audit import AuditKind, audit_append
from runtime.errors import (
    AuthorityDenied,
    BreakerTripped,
    Fenced,
    InfrastructureError,
    InputUndecodable,
    NondeterminismError,
    NotJournalable,
    StepFailed,
    StewardError,
    StopRequested,
    Suspend,
    TreePaused,
)
from runtime.limits import pauses
from runtime.models import Decision
from runtime.stops.services import lock_chain, stop_ack
from runtime.worker.context import Context
from runtime.worker.isolation import harness as isolation
from runtime.worker.stop_watch import watch

log = logging.getLogger(__name__)

DRAIN_MAX_TASKS = 100
DRAIN_MAX_SECONDS = 5.0

# Set when the worker process begins a warm shutdown: finish the attempt in hand, but
# claim nothing more, so SIGTERM is not held up by a drain (runtime/worker/celery_tasks.py).
_stopping = threading.Event()


def stop_draining() -> None:
    _stopping.set()


def stopping() -> bool:
    return _stopping.is_set()


# Per thread: whether a dense worker abandoned this thread (the stop watcher released its
# attempt by force while its step ran on). It claims nothing more: its place was given
# back (runtime/worker/dense.py). A solo worker exits instead.
_here = threading.local()


def abandoned_here() -> bool:
    return getattr(_here, "abandoned", False)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def run_pool(*, pool: str, worker: str | None = None, claimed: Callable[[str], None] | None = None) -> int:
    """Run queued tasks of `pool` until it is drained or the budget is spent; return
    how many attempts ran. If work may remain, wake another worker for it. `claimed(pool)`
    is called after each claim of a new task (a dense worker starts its next claimer)."""
    worker = worker or worker_id()
    deadline = time.monotonic() + DRAIN_MAX_SECONDS
    if _stopping.is_set():
        dispatch.send(pool)  # hand the wake-up to a worker that is staying
        return 0

    def claim_next_task() -> Claim | None:
        found = _claim(pool, worker)
        if found is not None and claimed is not None:
            claimed(pool)  # a dense worker starts its next claimer
        return found

    claim = claim_next_task()
    ran = 0
    while claim is not None:
        ran += 1
        more = ran < DRAIN_MAX_TASKS and time.monotonic() < deadline and not _stopping.is_set()
        # The attempt's end and the next claim commit together when they can, so the
        # freed slot passes straight to the next queued task (one commit, not two).
        claim = run_attempt(claim, then_claim=more)
        if abandoned_here():
            break  # this thread was abandoned: its attempt was released by force
        if claim is None and _stopping.is_set():
            # A warm shutdown began while the attempt ran: claim nothing more, and hand
            # what may remain of the queue to a worker that stays.
            dispatch.send(pool)
            break
        if claim is None and more and not outages.database.ongoing:
            claim = claim_next_task()
        if not more:  # budget spent: pass the wake-up on in case work remains
            dispatch.send(pool)
            break
    return ran


def _claim(pool: str, worker: str) -> Claim | None:
    """claim_next, retried with backoff for up to a lease while the database is away.

    If the connection dies during the claim we cannot tell whether it committed. If it
    did, the attempt has a lease that nobody renews, and the supervisor recovers it
    once the lease lapses; if it did not, the task is still queued and the retry (or
    the supervisor's re-sent wake-up) claims it.
    """
    give_up = time.monotonic() + config.lease_seconds()
    delays = outages.backoff()
    while True:
        try:
            claim = claim_next(pool=pool, worker=worker)
        except db.CONNECTION_ERRORS as exc:
            db.discard_connection()
            outages.database.failed(exc)
            delay = next(delays)
            if time.monotonic() + delay > give_up:
                return None  # the supervisor re-sends the wake-up for queued work
            time.sleep(delay)
            continue
        outages.database.recovered()
        return claim


def run_attempt(claim: Claim, *, then_claim: bool = False) -> Claim | None:
    """Run one attempt to its end. With then_claim, also claim the pool's next task in
    the transaction that ends this one, when the attempt ends by completing or failing;
    return that claim (None if there was none, or if the attempt ended otherwise)."""
    lease = claim.lease
    keeper.hold(lease)
    run = watch.hold(lease)  # a stop of this attempt is delivered into its running step
    try:
        return _run(claim, then_claim)
    except StopRequested as stopped:
        _stopped(claim, stopped, run)
    except Fenced as refused:
        _refused(claim, refused, run)
    except (InfrastructureError, *db.CONNECTION_ERRORS) as exc:
        _yield(claim, exc.cause if isinstance(exc, InfrastructureError) else exc)
    finally:
        _here.abandoned = run.forced and connections.per_statement()
        watch.drop()
        keeper.drop(lease)
    return None


def _run(claim: Claim, then_claim: bool) -> Claim | None:
    lease = claim.lease
    ctx = None
    try:
        # UnknownAgent: the agent's code is gone from this deploy. Its version is one this
        # worker serves: the claim filtered on it (runtime/sql/claim.sql).
        spec = agents.get(claim.agent, claim.version)
        input = _decode_input(claim)
        # The first attempt has nothing to replay; skip the round trip.
        journal_rows = [] if lease.epoch == 1 else journal.load(lease.task_id)
        ctx = Context(
            lease,
            agent=claim.agent,
            owner=claim.owner,
            root_id=claim.root_id,
            reason=claim.reason,
            journal_rows=journal_rows,
        )
        with _agent_code(lease.task_id):
            # An isolated agent's code runs in its sandbox; the harness answers its ctx
            # calls on this same Context, so all that follows is as in process.
            returned = isolation.run(ctx, spec, input) if spec.isolation == "process" else spec.fn(ctx, input)
            output = encoding.encode(returned, what="the agent's return value")
    except Suspend:
        return None  # the transition (sleep, wait, block) already committed
    except db.CONNECTION_ERRORS:
        raise  # the database, not the agent: run_attempt yields the attempt
    except (NondeterminismError, NotJournalable, Exception) as exc:
        halt = ctx.halt if ctx is not None and ctx.halt is not None else exc
        if isinstance(halt, (AuthorityDenied, BreakerTripped)):
            _halt(claim, halt)
            return None
        return _end(claim, then_claim, states.TaskEvent.FAIL, error=_failure(exc))
    if ctx.halt is not None:  # agent code caught the denial or the breaker's refusal and returned anyway
        _halt(claim, ctx.halt)
        return None
    faults.reach(faults.BEFORE_STATUS, task_id=lease.task_id, step="complete", epoch=lease.epoch)
    return _end(claim, then_claim, states.TaskEvent.COMPLETE, output=output)


def _halt(claim: Claim, halt: AuthorityDenied | BreakerTripped) -> None:
    """The attempt must end blocked, whatever agent code did with the refusal."""
    if isinstance(halt, AuthorityDenied):
        return _deny(claim, halt)
    if isinstance(halt, TreePaused):
        return _paused(claim, halt)
    return _trip(claim, halt)


def _deny(claim: Claim, denied: AuthorityDenied) -> None:
    """Authority was denied (at the executor, or the gateway): end the attempt `deny`, so
    the task is `blocked` with the decision on its row and `task.blocked` naming the
    decision, boundary and reason in the same statement (attempt_end.sql, fenced by the
    epoch). Nothing re-runs a blocked task by itself: an operator changes the grants and
    resumes it, and it asks again at its next effect. A denial whose decision is not
    this task's (a caller that made one up) fails the task instead: visible, not retried.
    """
    lease = claim.lease
    error = {
        "code": denied.code,
        "type": type(denied).__name__,
        "message": str(denied),
        "boundary": denied.boundary,
        "reason_code": denied.reason_code,
        "decision_id": denied.decision_id,
    }
    if not Decision.objects.filter(id=_uuid(denied.decision_id), task_id=lease.task_id, allowed=False).exists():
        end_attempt(lease, states.TaskEvent.FAIL, error=error)
        return None
    end_attempt(
        lease,
        states.TaskEvent.DENY,
        error=error,
        blocked_decision=denied.decision_id,
        note=f"denied at {denied.boundary}: {denied.reason_code}; change the grants, then resume",
        audit={
            "decision_id": denied.decision_id,
            "boundary": denied.boundary,
            "reason_code": denied.reason_code,
            **{k: denied.details[k] for k in ("authz_revision", "policy_version") if k in denied.details},
        },
    )
    return None


def _trip(claim: Claim, tripped: BreakerTripped) -> None:
    """A breaker refused the agent's next call (runtime/limits/breakers.py): end the
    attempt `trip`, so the task is `blocked` (breaker_tripped) with the breaker on its
    row, the refusal in `error` and `task.blocked` naming the breaker, its limit and
    what was observed, in one fenced statement (attempt_end.sql). Nothing re-runs it by
    itself: an operator resumes it, usually raising that task's limit first. A fan-out
    breaker also pauses the rest of the tree, in the same transaction."""
    details = {"breaker": tripped.breaker, "limit": tripped.limit, "observed": tripped.observed}
    lease = claim.lease
    with transaction.atomic(durable=True):
        paused = {}
        if tripped.breaker in states.FANOUT_BREAKERS:
            # The tree grew past a limit: pause all of it, not only this task (pauses.py).
            # A Fenced end below rolls the pause back with it: the next attempt trips again.
            paused = pauses.tree_pause(lease, root_id=claim.root_id, tripped=tripped)
        end_attempt(
            lease,
            states.TaskEvent.TRIP,
            error={
                "code": tripped.code,
                "type": type(tripped).__name__,
                "message": str(tripped),
                **details,
                **({"pause_id": paused["pause_id"]} if paused else {}),
            },
            breaker=tripped.breaker,
            audit={**details, **paused},
            note=f"breaker {tripped.breaker} tripped (limit {tripped.limit}); "
            + ("its tree is paused: resume it with the limit raised" if paused else "raise it or resume"),
        )


def _paused(claim: Claim, paused: TreePaused) -> None:
    """The task's tree is paused (runtime/limits/pauses.py): end the attempt `pause`, so
    the task is `blocked` (tree_paused) until an operator lifts the pause. Our own row is
    locked first: a release locks the whole tree before it queues what the pause holds,
    so either it ran first (and the pause is found lifted here: the task is queued again
    at once) or it waits for this commit and queues this task with the rest."""
    lease = claim.lease
    details = {"pause_id": paused.pause_id, "tripped_task": paused.tripped_task, "breaker": paused.breaker}
    with transaction.atomic(durable=True):
        fence(lease, "status", exclusive=True)
        end_attempt(
            lease,
            states.TaskEvent.PAUSE,
            error={"code": paused.code, "type": type(paused).__name__, "message": str(paused), **details},
            audit=details,
            note=f"tree paused: breaker {paused.breaker} tripped at task {paused.tripped_task}; resume the tree",
        )
        pauses.requeue_if_lifted(task_id=lease.task_id, actor=lease.actor)


def _uuid(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


@contextlib.contextmanager
def _agent_code(task_id):
    """Mark the connection while agent code runs: no grant is written from it, whatever
    actor the code names (migration 0012's trigger). Outside any transaction, so that no
    rollback of the attempt's own writes unmarks it."""
    if connections.per_statement():
        # A dense worker: no connection is held while agent code runs; each one taken
        # meanwhile is marked as it is taken (runtime/attempts/connections.py).
        with connections.agent_code(task_id), interrupts.region(interrupts.AGENT):
            yield
        return
    db.execute("agent_code", {"task": str(task_id)})
    try:
        with interrupts.region(interrupts.AGENT):
            yield
    finally:
        try:
            db.execute("agent_code", {"task": ""})
        except Exception:
            db.discard_connection()  # a new connection starts unmarked; nothing ran on it yet


def _decode_input(claim: Claim):
    try:
        return encoding.decode(claim.input_text)
    except (ValueError, RecursionError) as exc:
        raise InputUndecodable(
            f"the stored input of task {claim.lease.task_id} cannot be decoded: {type(exc).__name__}: {exc}"[:500]
        ) from None


def _failure(exc: BaseException) -> dict:
    """What a failed task records of why: a stable code, the type and the message."""
    if isinstance(exc, StepFailed):
        return {"code": exc.code, "type": exc.error_type, "message": str(exc), "step": exc.step}
    if isinstance(exc, (NondeterminismError, NotJournalable, StewardError)):
        return {"code": exc.code, "type": type(exc).__name__, "message": str(exc)}
    return {"code": "AGENT_ERROR", **encoding.error_record(exc)}


def _end(claim: Claim, then_claim: bool, event: states.TaskEvent, **fields) -> Claim | None:
    lease = claim.lease
    # A warm shutdown that began while this attempt ran: claim nothing more (then_claim
    # was decided before it began; a dense worker's attempts run for minutes).
    if not then_claim or _stopping.is_set():
        end_attempt(lease, event, **fields)
        return None
    with transaction.atomic(durable=True):
        end_attempt(lease, event, **fields)
        return claim_next(pool=lease.pool, worker=lease.worker)


def _yield(claim: Claim, cause: BaseException) -> None:
    """The database failed under the attempt: hand the task back for a retry.

    The yield is itself a fenced write, retried with backoff on a fresh connection for
    up to a lease. If it never lands, the lease lapses and the supervisor recovers the
    task instead; if a newer attempt or a stop got there first, it is refused like any
    late write of ours.
    """
    lease = claim.lease
    outages.database.failed(cause)
    db.discard_connection()
    give_up = time.monotonic() + config.lease_seconds()
    delays = outages.backoff()
    while True:
        try:
            end_attempt(
                lease,
                states.TaskEvent.YIELD,
                note=f"retrying after a database error: {type(cause).__name__}",
                error={"code": InfrastructureError.code, **encoding.error_record(cause)},
            )
        except Fenced as refused:
            _refused(claim, refused)
            return
        except db.CONNECTION_ERRORS as exc:
            db.discard_connection()
            outages.database.failed(exc)
            delay = next(delays)
            if time.monotonic() + delay > give_up:
                log.info("attempt %s of %s could not yield; its lease will lapse", lease.epoch, lease.task_id)
                return
            time.sleep(delay)
            continue
        outages.database.recovered()
        log.info("attempt %s of %s yielded after a database error", lease.epoch, lease.task_id)
        return


def _refused(claim: Claim, refused: Fenced, run: interrupts.Running | None = None) -> None:
    """A newer attempt or a stop owns the task: record the refusal and, if the task
    moved on without us, acknowledge by ending our attempt and freeing our slot."""
    lease = claim.lease
    if run is not None and run.forced:
        return  # the stop watcher ended this attempt by force and acknowledged it
    log.info("attempt %s of %s refused: %s", lease.epoch, lease.task_id, refused)
    _leave(
        lease,
        run,
        end_reason="fenced",
        at=refused.write,
        refusal={"boundary": "storage", "write": refused.write, "epoch": lease.epoch},
    )


def _stopped(claim: Claim, stopped: StopRequested, run: interrupts.Running) -> None:
    """A stop reached the running step (delivered by the stop watcher, or the gateway
    cut a call of the stopped task): the agent's code has been left, so end the attempt,
    free its slot and acknowledge at the worker boundary. Nothing else of the attempt is
    written: the step it was in stays unjournaled."""
    lease = claim.lease
    log.info("attempt %s of %s stopped: %s", lease.epoch, lease.task_id, stopped)
    if run.forced:
        return
    db.discard_connection()  # the signal may have landed inside a statement of the agent's own
    _leave(lease, run, end_reason="stopped", at=stopped.where)


def _leave(lease, run: interrupts.Running | None, *, end_reason: str, at: str, refusal: dict | None = None) -> None:
    """In one transaction: the refusal's audit row (if any), the end of our attempt and
    its slot if the task moved on without us, and then, if a stop moved it, the worker
    boundary's acknowledgment: this attempt left agent code at a step boundary. The
    task's rows are locked first, in the order a stop and the sweep take them."""
    try:
        with transaction.atomic(durable=True):
            lock_chain(lease.task_id)  # before the attempt's row and the task's audit chain
            if refusal is not None:
                audit_append(
                    actor=lease.actor,
                    tenant=lease.tenant,
                    task_id=lease.task_id,
                    kind=AuditKind.WRITE_REFUSED,
                    data=refusal,
                )
            if release_stopped(task_id=lease.task_id, epoch=lease.epoch, end_reason=end_reason, actor=lease.actor):
                stop_ack(
                    task_id=lease.task_id,
                    boundary=states.WORKER,
                    by=lease.actor,
                    detail={"ended": "cleanly", "epoch": lease.epoch, "at": at, **_since(run)},
                )
    except db.CONNECTION_ERRORS:
        db.discard_connection()
        log.info(
            "could not record the end of %s epoch %s (%s); the supervisor releases it",
            lease.task_id,
            lease.epoch,
            end_reason,
        )


def _since(run: interrupts.Running | None) -> dict:
    """How long after the worker saw the stop its attempt ended (when it saw it)."""
    if run is None or run.seen_at is None:
        return {}
    return {"after_seconds": round(time.monotonic() - run.seen_at, 3), "seen": run.where}
