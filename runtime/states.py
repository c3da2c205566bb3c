"""Statuses and the transitions allowed between them, as data.

docs/state-machines.md draws these tables; tests/runtime/test_state_docs.py checks the
drawing against this module, so change both together. Every transition in the code is a
conditional UPDATE whose WHERE clause names the sources listed here (states.sources()).
"""

from __future__ import annotations

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

# event -> (sources, target). Each event is one conditional UPDATE in the code.
TASK_TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "claim": (frozenset({QUEUED}), RUNNING),  # a worker took the lease and a slot
    "complete": (frozenset({RUNNING}), COMPLETED),  # the agent function returned
    "fail": (frozenset({RUNNING}), FAILED),  # the agent raised / nondeterminism
    "sleep": (frozenset({RUNNING}), SLEEPING),  # ctx.sleep() with time left
    "wait": (frozenset({RUNNING}), WAITING),  # ctx.wait() with children pending
    "block": (frozenset({RUNNING}), BLOCKED),  # an effect became `unknown`
    "deny": (frozenset({RUNNING}), BLOCKED),  # authorize() denied what the agent asked for
    "await": (frozenset({RUNNING}), BLOCKED),  # ctx.request_approval() persisted a package
    "trip": (frozenset({RUNNING}), BLOCKED),  # a fan-out or runaway breaker refused the next step
    "pause": (frozenset({RUNNING}), BLOCKED),  # its tree is paused: ended before its next new step
    "hold": (frozenset({QUEUED, SLEEPING, WAITING}), BLOCKED),  # its tree was paused (a fan-out trip) while it was idle
    "yield": (frozenset({RUNNING}), QUEUED),  # database error: retry (dead-letter past MAX_CRASHES)
    "recover": (frozenset({RUNNING}), QUEUED),  # lease expired: supervisor re-queues
    "dead_letter": (frozenset({RUNNING}), DEAD),  # lease expired MAX_CRASHES times
    "wake": (frozenset({SLEEPING, WAITING}), QUEUED),  # timer due / children finished
    "unblock": (frozenset({BLOCKED}), QUEUED),  # an operator resolved the effect (effect_unknown only)
    "decided": (frozenset({BLOCKED}), QUEUED),  # its approval was approved, denied or expired
    "reset": (frozenset({BLOCKED}), QUEUED),  # an operator resumed it past its breaker (task_resume)
    "release": (frozenset({BLOCKED}), QUEUED),  # an operator lifted its tree's pause (task_resume in the tree)
    "resume": (frozenset({DEAD, FAILED, BLOCKED, CANCELLED}), QUEUED),  # explicit, audited; blocked: denied only
    # A stop (runtime/stops/): every live task of the tree moves to stopping in one
    # transaction, which closes its admission; each becomes cancelled once its four
    # boundaries acknowledged and its children are cancelled, or its bound passed.
    "stop": (frozenset(LIVE - {STOPPING}), STOPPING),  # operator stop (the tree, or an agent's tasks)
    "cancel": (frozenset({STOPPING}), CANCELLED),  # acknowledged, or the stop's bound passed
}

# --- Stop boundaries: each writes one acknowledgment per stopped task (steward_stop_ack) --
WORKER = "worker"  # the attempt ended: cleanly at a step boundary, or by force
STORAGE = "storage"  # the fence is in place: every write of the task is refused
CREDENTIAL_GATEWAY = "credential_gateway"  # its tokens are refused; its in-flight calls cut or unresolved
SCHEDULER = "scheduler"  # its timers and queued work dropped
STOP_BOUNDARIES = (WORKER, STORAGE, CREDENTIAL_GATEWAY, SCHEDULER)

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
BLOCKED_BY: dict[str, str] = {
    "block": EFFECT_UNKNOWN,
    "deny": AUTHORITY_DENIED,
    "unblock": EFFECT_UNKNOWN,  # resolving an effect never releases a denied task
    "resume": AUTHORITY_DENIED,  # resuming never skips past an unknown effect
    "await": APPROVAL_PENDING,
    "decided": APPROVAL_PENDING,  # only a decision (or expiry) of its approval releases it
    "trip": BREAKER_TRIPPED,
    "reset": BREAKER_TRIPPED,  # task_resume, usually with raised limits; it is checked again
    "pause": TREE_PAUSED,
    "hold": TREE_PAUSED,
    "release": TREE_PAUSED,  # task_resume of any task in the tree lifts the pause for all it holds
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

APPROVAL_TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "approve": (frozenset({PENDING}), APPROVED),  # a person, before expires_at (approval_decide)
    "deny": (frozenset({PENDING}), DENIED),  # a person (approval_decide)
    "expire": (frozenset({PENDING}), EXPIRED),  # the sweep, the executor on replay or a decision, past expires_at
    "outdate": (frozenset({PENDING}), STALE),  # an approve found the context changed (approval_decide)
    "invalidate": (frozenset({APPROVED}), STALE),  # the executor's re-check found a change
    "consume": (frozenset({APPROVED}), CONSUMED),  # the executor's re-check found none
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

EFFECT_TRANSITIONS: dict[str, tuple[frozenset[str], str]] = {
    "commit": (frozenset({INTENT}), COMMITTED),  # receipt recorded
    "reject": (frozenset({INTENT}), EFFECT_FAILED),  # the service refused the action
    "doubt": (frozenset({INTENT, PARTIAL}), UNKNOWN),  # outcome cannot be known safely
    "cut": (frozenset({INTENT}), PARTIAL),  # the gateway cut a stream mid-answer (AUTHZ_REVOKED)
    "retake": (frozenset({PARTIAL}), INTENT),  # a resumed attempt sends a partial call again, same key
    "resolve_committed": (frozenset({UNKNOWN}), COMMITTED),  # operator: it happened
    "resolve_failed": (frozenset({UNKNOWN}), EFFECT_FAILED),  # operator: it did not happen
    "resolve_retry": (frozenset({UNKNOWN}), INTENT),  # operator: send it again, same key
}

# --- Effect classes ------------------------------------------------------------------
READ = "read"  # observes only; always safe to repeat
IDEMPOTENT = "idempotent"  # repeating it has no further effect (PUT, upsert)
REVERSIBLE = "reversible"  # changes the world, can be undone
IRREVERSIBLE = "irreversible"  # changes the world for good; never re-sent automatically
EFFECT_CLASSES = (READ, IDEMPOTENT, REVERSIBLE, IRREVERSIBLE)


def sources(event: str, table: dict[str, tuple[frozenset[str], str]] = TASK_TRANSITIONS) -> list[str]:
    """The statuses an event may start from, sorted so generated SQL is stable."""
    return sorted(table[event][0])


def target(event: str, table: dict[str, tuple[frozenset[str], str]] = TASK_TRANSITIONS) -> str:
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
