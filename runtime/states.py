"""Statuses and the transitions allowed between them, as data.

docs/state-machines.md draws these tables; tests/runtime/test_state_docs.py checks the
drawing against this module, so change both together. Every transition in the code is a
conditional UPDATE whose WHERE clause names the sources listed here (states.sources()).
"""

from __future__ import annotations

from enum import StrEnum

# --- Task statuses ---------------------------------------------------------------
QUEUED = "queued"  # admitted to its pool; waits for a free slot and a worker
RUNNING = "running"  # an attempt holds the lease and one pool slot
SLEEPING = "sleeping"  # a durable timer; holds no worker and no slot until wake_at
WAITING = "waiting"  # waits for children; holds no worker and no slot
BLOCKED = "blocked"  # waits for a person: an unknown effect, a denial, an approval, a breaker or its tree's pause (blocked_reason)
DEAD = "dead"  # its worker died MAX_CRASHES times in a row; waits for a resume
STOPPING = "stopping"  # a stop closed its admission; waits for its boundaries' acknowledgments
COMPLETED = "completed"  # the agent returned; terminal
FAILED = "failed"  # the agent raised, or replay was nondeterministic; terminal
CANCELLED = "cancelled"  # stopped by an operator; terminal unless explicitly resumed

TASK_STATUSES = (QUEUED, RUNNING, SLEEPING, WAITING, BLOCKED, DEAD, STOPPING, COMPLETED, FAILED, CANCELLED)
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})
LIVE = frozenset(TASK_STATUSES) - TERMINAL


class TaskEvent(StrEnum):
    """What moves a task from one status to another (TASK_TRANSITIONS). Each is one
    conditional UPDATE in the code; an attempt's end names its event (end_reason)."""

    CLAIM = "claim"  # a worker took the lease and a slot
    COMPLETE = "complete"  # the agent function returned
    FAIL = "fail"  # the agent raised / nondeterminism
    SLEEP = "sleep"  # ctx.sleep() with time left
    WAIT = "wait"  # ctx.wait() with children pending
    BLOCK = "block"  # an effect became `unknown`
    DENY = "deny"  # authorize() denied what the agent asked for
    AWAIT = "await"  # ctx.request_approval() persisted a package
    TRIP = "trip"  # a fan-out or runaway breaker refused the next step
    PAUSE = "pause"  # its tree is paused: ended before its next new step
    HOLD = "hold"  # its tree was paused (a fan-out trip) while it was idle
    YIELD = "yield"  # database error: retry (dead-letter past MAX_CRASHES)
    RECOVER = "recover"  # lease expired: supervisor re-queues
    DEAD_LETTER = "dead_letter"  # lease expired MAX_CRASHES times
    WAKE = "wake"  # timer due / children finished
    UNBLOCK = "unblock"  # an operator resolved the effect (effect_unknown only)
    DECIDED = "decided"  # its approval was approved, denied or expired
    RESET = "reset"  # an operator resumed it past its breaker (task_resume)
    RELEASE = "release"  # an operator lifted its tree's pause (task_resume in the tree)
    RESUME = "resume"  # explicit, audited; blocked: denied only
    STOP = "stop"  # operator stop (the tree, or an agent's tasks)
    CANCEL = "cancel"  # acknowledged, or the stop's bound passed


# event -> (sources, target).
TASK_TRANSITIONS: dict[TaskEvent, tuple[frozenset[str], str]] = {
    TaskEvent.CLAIM: (frozenset({QUEUED}), RUNNING),
    TaskEvent.COMPLETE: (frozenset({RUNNING}), COMPLETED),
    TaskEvent.FAIL: (frozenset({RUNNING}), FAILED),
    TaskEvent.SLEEP: (frozenset({RUNNING}), SLEEPING),
    TaskEvent.WAIT: (frozenset({RUNNING}), WAITING),
    TaskEvent.BLOCK: (frozenset({RUNNING}), BLOCKED),
    TaskEvent.DENY: (frozenset({RUNNING}), BLOCKED),
    TaskEvent.AWAIT: (frozenset({RUNNING}), BLOCKED),
    TaskEvent.TRIP: (frozenset({RUNNING}), BLOCKED),
    TaskEvent.PAUSE: (frozenset({RUNNING}), BLOCKED),
    TaskEvent.HOLD: (frozenset({QUEUED, SLEEPING, WAITING}), BLOCKED),
    TaskEvent.YIELD: (frozenset({RUNNING}), QUEUED),
    TaskEvent.RECOVER: (frozenset({RUNNING}), QUEUED),
    TaskEvent.DEAD_LETTER: (frozenset({RUNNING}), DEAD),
    TaskEvent.WAKE: (frozenset({SLEEPING, WAITING}), QUEUED),
    TaskEvent.UNBLOCK: (frozenset({BLOCKED}), QUEUED),
    TaskEvent.DECIDED: (frozenset({BLOCKED}), QUEUED),
    TaskEvent.RESET: (frozenset({BLOCKED}), QUEUED),
    TaskEvent.RELEASE: (frozenset({BLOCKED}), QUEUED),
    TaskEvent.RESUME: (frozenset({DEAD, FAILED, BLOCKED, CANCELLED}), QUEUED),
    # A stop (runtime/stops/): every live task of the tree moves to stopping in one
    # transaction, which closes its admission; each becomes cancelled once its four
    # boundaries acknowledged and its children are cancelled, or its bound passed.
    TaskEvent.STOP: (frozenset(LIVE - {STOPPING}), STOPPING),
    TaskEvent.CANCEL: (frozenset({STOPPING}), CANCELLED),
}

# --- Stop boundaries: each writes one acknowledgment per stopped task (steward_stop_ack) --
WORKER = "worker"  # the attempt ended: cleanly at a step boundary, or by force
STORAGE = "storage"  # the fence is in place: every write of the task is refused
CREDENTIAL_GATEWAY = "credential_gateway"  # its tokens are refused; its in-flight calls cut or unresolved
SCHEDULER = "scheduler"  # its timers and queued work dropped
STOP_BOUNDARIES = (WORKER, STORAGE, CREDENTIAL_GATEWAY, SCHEDULER)


class StopOutcome(StrEnum):
    """How a stop ended (steward_stop.outcome), once no task it covers is stopping."""

    ACKNOWLEDGED = "acknowledged"  # every boundary of every task answered
    BOUNDED = "bounded"  # the bound passed first for some task: it was cancelled without every answer


# --- Why a task is blocked (steward_task.blocked_reason) ---------------------------------
# Both wait for a person, but for different acts: an unknown effect is settled by
# resolving it (effect_resolve), a denial by changing grants and resuming (task_resume).
# A blocked task holds no lease, no timer and no slot: the supervisor never re-runs it.
EFFECT_UNKNOWN = "effect_unknown"  # an effect may or may not have happened; resolve it
AUTHORITY_DENIED = "authority_denied"  # authorize() denied an action; change grants, then resume
APPROVAL_PENDING = "approval_pending"  # ctx.request_approval() waits for a person's decision (or expiry)
BREAKER_TRIPPED = "breaker_tripped"  # a breaker refused its next step (steward_task.breaker); resume it
TREE_PAUSED = "tree_paused"  # a fan-out breaker tripped elsewhere in its tree (steward_tree_pause); resume the tree
BLOCKED_REASONS = (EFFECT_UNKNOWN, AUTHORITY_DENIED, APPROVAL_PENDING, BREAKER_TRIPPED, TREE_PAUSED)

# event -> the blocked_reason it writes (into blocked) or requires (out of blocked). An
# event out of `blocked` that is not listed here does not leave it (cancel leaves any).
BLOCKED_BY: dict[TaskEvent, str] = {
    TaskEvent.BLOCK: EFFECT_UNKNOWN,
    TaskEvent.DENY: AUTHORITY_DENIED,
    TaskEvent.UNBLOCK: EFFECT_UNKNOWN,  # resolving an effect never releases a denied task
    TaskEvent.RESUME: AUTHORITY_DENIED,  # resuming never skips past an unknown effect
    TaskEvent.AWAIT: APPROVAL_PENDING,
    TaskEvent.DECIDED: APPROVAL_PENDING,  # only a decision (or expiry) of its approval releases it
    TaskEvent.TRIP: BREAKER_TRIPPED,
    TaskEvent.RESET: BREAKER_TRIPPED,  # task_resume, usually with raised limits; it is checked again
    TaskEvent.PAUSE: TREE_PAUSED,
    TaskEvent.HOLD: TREE_PAUSED,
    TaskEvent.RELEASE: TREE_PAUSED,  # task_resume of any task in the tree lifts the pause for all it holds
}

# --- Breakers (runtime/limits/breakers.py): which one tripped (steward_task.breaker) ---------
# Stable codes: the console, the API, the audit trail (`task.blocked`) and the CLI show them.
FANOUT_CHILDREN = "fanout_children"  # a spawn past the task's maximum of children
FANOUT_DEPTH = "fanout_depth"  # a spawn whose child would sit deeper than the tree's maximum
FANOUT_RATE = "fanout_rate"  # a spawn past the tree's maximum of spawns in the last minute
RUNAWAY_STEPS = "runaway_steps"  # a step past the task's maximum of journaled steps
RUNAWAY_WALL_CLOCK = "runaway_wall_clock"  # a step after the task's maximum of time since its first start
BREAKERS = (FANOUT_CHILDREN, FANOUT_DEPTH, FANOUT_RATE, RUNAWAY_STEPS, RUNAWAY_WALL_CLOCK)
# A fan-out trip pauses the whole tree (runtime/limits/pauses.py): a tree that grows too
# wide, deep or fast is one runaway, not one task's. A runaway trip blocks its task only.
FANOUT_BREAKERS = frozenset({FANOUT_CHILDREN, FANOUT_DEPTH, FANOUT_RATE})

# --- Approval states (steward_approval.state, runtime/approvals/) ---------------------
PENDING = "pending"  # waits for a person's decision until expires_at
APPROVED = "approved"  # a person approved it; the executor re-checks it before acting
DENIED = "denied"  # a person denied it; the agent's denial branch runs
EXPIRED = "expired"  # nobody decided before expires_at: expiry means deny
STALE = "stale"  # the action, its context or authority changed since the request: found at the approve, or after it
CONSUMED = "consumed"  # approved and re-checked unchanged: the agent acts on it, once
APPROVAL_STATES = (PENDING, APPROVED, DENIED, EXPIRED, STALE, CONSUMED)
APPROVAL_DECIDED = frozenset({APPROVED, DENIED, EXPIRED, STALE, CONSUMED})


class ApprovalEvent(StrEnum):
    """What moves an approval package (APPROVAL_TRANSITIONS)."""

    APPROVE = "approve"  # a person, before expires_at (approval_decide)
    DENY = "deny"  # a person (approval_decide)
    EXPIRE = "expire"  # the sweep, the executor on replay or a decision, past expires_at
    OUTDATE = "outdate"  # an approve found the context changed (approval_decide)
    INVALIDATE = "invalidate"  # the executor's re-check found a change
    CONSUME = "consume"  # the executor's re-check found none


APPROVAL_TRANSITIONS: dict[ApprovalEvent, tuple[frozenset[str], str]] = {
    ApprovalEvent.APPROVE: (frozenset({PENDING}), APPROVED),
    ApprovalEvent.DENY: (frozenset({PENDING}), DENIED),
    ApprovalEvent.EXPIRE: (frozenset({PENDING}), EXPIRED),
    ApprovalEvent.OUTDATE: (frozenset({PENDING}), STALE),
    ApprovalEvent.INVALIDATE: (frozenset({APPROVED}), STALE),
    ApprovalEvent.CONSUME: (frozenset({APPROVED}), CONSUMED),
}

# --- Attempt reasons: why a new attempt was made ------------------------------------
FIRST = "first"  # the task's first attempt
RECOVERY = "recovery"  # the previous attempt's lease expired (worker died or froze)
RESUME = "resume"  # after a sleep, a wait, an operator resolution or resume
RETRY = "retry"  # the previous attempt hit an infrastructure error
ATTEMPT_REASONS = (FIRST, RECOVERY, RESUME, RETRY)

# --- Effect states ---------------------------------------------------------------
INTENT = "intent"  # recorded before the call; the call may or may not have happened
COMMITTED = "committed"  # the service answered; its receipt is recorded
EFFECT_FAILED = "failed"  # the service said it did not perform the action
UNKNOWN = "unknown"  # may or may not have happened; an operator must resolve it
PARTIAL = "partial"  # a boundary cut the call after part of the answer; its receipt says what came
EFFECT_STATES = (INTENT, COMMITTED, EFFECT_FAILED, UNKNOWN, PARTIAL)


class EffectEvent(StrEnum):
    """What moves an effect's ledger row (EFFECT_TRANSITIONS)."""

    COMMIT = "commit"  # receipt recorded
    REJECT = "reject"  # the service refused the action
    DOUBT = "doubt"  # outcome cannot be known safely
    CUT = "cut"  # the gateway cut a stream mid-answer (AUTHZ_REVOKED)
    RETAKE = "retake"  # a resumed attempt sends a partial call again, same key
    RESOLVE_COMMITTED = "resolve_committed"  # operator: it happened
    RESOLVE_FAILED = "resolve_failed"  # operator: it did not happen
    RESOLVE_RETRY = "resolve_retry"  # operator: send it again, same key


EFFECT_TRANSITIONS: dict[EffectEvent, tuple[frozenset[str], str]] = {
    EffectEvent.COMMIT: (frozenset({INTENT}), COMMITTED),
    EffectEvent.REJECT: (frozenset({INTENT}), EFFECT_FAILED),
    EffectEvent.DOUBT: (frozenset({INTENT, PARTIAL}), UNKNOWN),
    EffectEvent.CUT: (frozenset({INTENT}), PARTIAL),
    EffectEvent.RETAKE: (frozenset({PARTIAL}), INTENT),
    EffectEvent.RESOLVE_COMMITTED: (frozenset({UNKNOWN}), COMMITTED),
    EffectEvent.RESOLVE_FAILED: (frozenset({UNKNOWN}), EFFECT_FAILED),
    EffectEvent.RESOLVE_RETRY: (frozenset({UNKNOWN}), INTENT),
}

# --- Effect classes ------------------------------------------------------------------
READ = "read"  # observes only; always safe to repeat
IDEMPOTENT = "idempotent"  # repeating it has no further effect (PUT, upsert)
REVERSIBLE = "reversible"  # changes the world, can be undone
IRREVERSIBLE = "irreversible"  # changes the world for good; never re-sent automatically
EFFECT_CLASSES = (READ, IDEMPOTENT, REVERSIBLE, IRREVERSIBLE)


# --- Step kinds: what a journal row records (steward_step.kind) ---------------------------
class StepKind(StrEnum):
    """Which Context call a journal row records. A replay that finds another kind at a
    seq than the code asks for is nondeterministic (runtime/worker/context.py)."""

    STEP = "step"  # ctx.step(): a function's output or error
    NOW = "now"  # ctx.now(): the database's clock
    RANDOM = "random"  # ctx.random()
    EFFECT = "effect"  # ctx.effect(), ctx.model(), ctx.tool(): the ledger's receipt or error
    SLEEP = "sleep"  # ctx.sleep(): the wake time
    SPAWN = "spawn"  # ctx.spawn(): the child's id, or the refusal
    WAIT = "wait"  # ctx.wait(): the children's results
    APPROVAL = "approval"  # ctx.request_approval(): the packages requested
    APPROVAL_CHECK = "approval_check"  # their re-check once decided: each one's outcome
    PATCH = "patch"  # ctx.patched(): this task took a patch's new path (docs/adr/0037-agent-versions.md)
    MEMORY = "memory"  # ctx.memory.get() / put(): the record read, or whether the write won


def sources(event: str, table: dict = TASK_TRANSITIONS) -> list[str]:
    """The statuses an event may start from, sorted so generated SQL is stable."""
    return sorted(table[event][0])


def target(event: str, table: dict = TASK_TRANSITIONS) -> str:
    return table[event][1]


def may_resend_with_same_key(effect_class: str, keyed: bool) -> bool:
    """Whether recovery may repeat an effect whose intent has no receipt.

    Reads and idempotent actions are safe to repeat. A reversible action is safe to
    repeat only when the service deduplicates by our key. An irreversible action is
    never re-sent automatically, keyed or not: a person decides (docs/contracts.md §1).
    """
    if effect_class in (READ, IDEMPOTENT):
        return True
    return effect_class == REVERSIBLE and keyed


class MemorySource(StrEnum):
    """Where a memory record's content came from (runtime/memory/). A model's or a tool's
    is untrusted (runtime/taint.py): the record is tainted, and so is every string read
    back from it; the others are trusted as the deployer's code or a person is."""

    AGENT = "agent"  # the agent's own code computed it (no untrusted text in the value)
    MODEL = "model"  # text a model produced (an UntrustedText in the value, or declared)
    TOOL = "tool"  # what a tool call returned ({"untrusted": true, ...} in the value, or declared)
    PERSON = "person"  # an operator wrote it (memory_put, the CLI): never an agent's claim


MEMORY_SOURCES = tuple(s.value for s in MemorySource)  # plain strings: what the table's check holds
UNTRUSTED_SOURCES = (MemorySource.MODEL.value, MemorySource.TOOL.value)


class MemoryChange(StrEnum):
    """How a version of a memory record came to be (docs/state-machines.md, "Memory records")."""

    WRITE = "write"  # ctx.memory.put() or memory_put(): a new value
    UPGRADE = "upgrade"  # the previous version's payload carried to its kind's next schema version
    ROLLBACK = "rollback"  # a person made an earlier version's payload current again


MEMORY_CHANGES = tuple(c.value for c in MemoryChange)
