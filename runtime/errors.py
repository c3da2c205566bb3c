"""Errors with stable codes. The API, the CLI and the console show `code` verbatim, so
codes never change once released; messages may improve.
"""

from __future__ import annotations


class StewardError(Exception):
    """A refusal the caller can act on. `status` is the HTTP status the API uses."""

    code = "STEWARD_ERROR"
    status = 400

    def __init__(self, message: str, **details):
        super().__init__(message)
        self.message = message
        self.details = details

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "details": self.details}


class UnknownAgent(StewardError):
    code = "UNKNOWN_AGENT"
    status = 422


class InvalidInput(StewardError):
    """Input, a filter or a cursor the request carried that cannot be used as given."""

    code = "INVALID_INPUT"
    status = 422


class InputTooLarge(StewardError):
    code = "INPUT_TOO_LARGE"
    status = 413


# The limits on JSON a caller hands in (runtime/encoding.py, docs/limits.md). Each is an
# InvalidInput, so a caller that only cares that the input was refused catches that.


class InputTooDeep(InvalidInput):
    """Arrays and objects nested past encoding.MAX_DEPTH."""

    code = "INPUT_TOO_DEEP"


class NumberOutOfRange(InvalidInput):
    """A JSON number that is not finite or lies outside the signed 64-bit range."""

    code = "NUMBER_OUT_OF_RANGE"


class InvalidString(InvalidInput):
    """Text holding \\u0000 (PostgreSQL cannot store it) or a lone surrogate (not UTF-8),
    or free text (a note, a reason) past its length."""

    code = "INVALID_STRING"


class InvalidEncoding(InvalidInput):
    """Bytes (an input file, a command-line argument) that are not UTF-8."""

    code = "INVALID_ENCODING"


# --- Arguments (runtime/arguments.py) ----------------------------------------------------


class InvalidArgument(StewardError):
    """An argument of the wrong type or form (the CLI's parser reports these too)."""

    code = "INVALID_ARGUMENT"


class InvalidIdentifier(InvalidArgument):
    """A tenant, owner, actor, caller key, agent or pool name that does not fit its column
    or its form: empty, too long, not printable, or (pools) not a slug."""

    code = "INVALID_IDENTIFIER"


class ArgumentOutOfRange(InvalidArgument):
    """A count or duration outside its documented bounds (pool limits, --limit, ...)."""

    code = "ARGUMENT_OUT_OF_RANGE"


class QueueFull(StewardError):
    code = "QUEUE_FULL"
    status = 429


class IdempotencyConflict(StewardError):
    code = "IDEMPOTENCY_CONFLICT"
    status = 409


class TaskNotFound(StewardError):
    code = "TASK_NOT_FOUND"
    status = 404


class AmbiguousTaskId(StewardError):
    """A task id prefix (the CLI accepts one) that begins more than one task's id."""

    code = "AMBIGUOUS_TASK_ID"


class EffectNotFound(StewardError):
    code = "EFFECT_NOT_FOUND"
    status = 404


class AuditEventNotFound(StewardError):
    code = "AUDIT_EVENT_NOT_FOUND"
    status = 404


class StepNotFound(StewardError):
    code = "STEP_NOT_FOUND"
    status = 404


class UnknownPool(StewardError):
    """Pools are created explicitly (pool_create), or on first use only for the default
    pool and an agent's declared pool: a typo must not escape the limits."""

    code = "UNKNOWN_POOL"
    status = 404


class InputUndecodable(StewardError):
    """A claimed task's stored input could not be decoded (it was written behind the
    API's back: submission refuses such input). The task fails alone with this code."""

    code = "INPUT_UNDECODABLE"


class PoolExists(StewardError):
    code = "POOL_EXISTS"
    status = 409


class PoolInUse(StewardError):
    """A pool some task names cannot be removed (tasks are never deleted)."""

    code = "POOL_IN_USE"
    status = 409


class Unauthenticated(StewardError):
    """No credential, or one that is unknown, revoked or expired (the web side's access module)."""

    code = "AUTH_REQUIRED"
    status = 401


class Forbidden(StewardError):
    """A known person without the right for this action (a viewer acting, a read token
    operating). Never for another tenant's object: that one is not found (404)."""

    code = "FORBIDDEN"
    status = 403


class MetricsForbidden(StewardError):
    """/metrics without its token, from an address not allowed to scrape it. One answer
    whichever check failed: its labels name tenants (console/metrics.py)."""

    code = "METRICS_FORBIDDEN"
    status = 403


class TokenNotFound(StewardError):
    code = "TOKEN_NOT_FOUND"
    status = 404


class TenantNotFound(StewardError):
    code = "TENANT_NOT_FOUND"
    status = 404


class PersonNotFound(StewardError):
    code = "PERSON_NOT_FOUND"
    status = 404


class MemberNotFound(StewardError):
    """No such member in your tenant (the person may exist, or belong to another tenant)."""

    code = "MEMBER_NOT_FOUND"
    status = 404


class LastAdmin(StewardError):
    """Demoting or removing a tenant's only admin: nobody could manage its members after."""

    code = "LAST_ADMIN"
    status = 409


class InvalidTransition(StewardError):
    """The object is not in a status this action starts from (someone else moved it)."""

    code = "INVALID_TRANSITION"
    status = 409


# --- Stops (runtime/stops/) ---------------------------------------------------------------


class AgentStopped(StewardError):
    """The agent's kill switch is closed in this tenant: no task of it is admitted."""

    code = "AGENT_STOPPED"
    status = 409


class StopNotFound(StewardError):
    code = "STOP_NOT_FOUND"
    status = 404


# --- Authority (runtime/authz/) ----------------------------------------------------------


class GrantNotFound(StewardError):
    code = "GRANT_NOT_FOUND"
    status = 404


class DecisionNotFound(StewardError):
    code = "DECISION_NOT_FOUND"
    status = 404


class GrantRequiresPerson(StewardError):
    """Only a person (`user:<name>`) may create, narrow or revoke a grant: never an agent,
    a task, a worker or anything that came from agent code."""

    code = "GRANT_REQUIRES_PERSON"
    status = 403
    boundary = "grant_check"  # the boundary that refuses it (docs/contracts.md, Vocabulary)

    def __init__(self, message: str, **details):
        super().__init__(message, boundary=self.boundary, **details)


class BudgetRequiresPerson(StewardError):
    """Only a person (`user:<name>`) may set a token budget or a service quota: never an
    agent, a task, a worker or anything that came from agent code."""

    code = "BUDGET_REQUIRES_PERSON"
    status = 403


class VersionConflict(StewardError):
    """A conditional write named a version of a budget or quota that is no longer the
    current one: someone changed it since it was read. Read it again and decide anew."""

    code = "VERSION_CONFLICT"
    status = 409


# --- Agent versions (docs/adr/0037-agent-versions.md) -------------------------------------


class VersionNotServed(StewardError):
    """An upgrade named an agent version this process does not serve: it cannot replay the
    task's journal on code it does not have. Run it where that version is deployed."""

    code = "VERSION_NOT_SERVED"
    status = 409


class UpgradeDoesNotReplay(StewardError):
    """The task's journal so far does not replay on the new version (a dry replay found
    another step, or another kind of step, at a seq): upgrading it would fail it, or
    worse, give its recorded steps another meaning. Nothing changed."""

    code = "UPGRADE_DOES_NOT_REPLAY"
    status = 409


class TaskNotUpgradable(StewardError):
    """The task is running, stopping or finished: only a task between attempts (queued,
    sleeping, waiting or blocked) moves to another version; a running one may be
    upgraded once its attempt ends."""

    code = "TASK_NOT_UPGRADABLE"
    status = 409


class UpgradeRaced(StewardError):
    """The task moved on (an attempt claimed it, or another upgrade won) between the dry
    replay and the write: the replay no longer speaks for its journal. Nothing changed;
    try again."""

    code = "UPGRADE_RACED"
    status = 409


class VersionInUse(StewardError):
    """An agent version cannot be retired while a task that is not finished runs it."""

    code = "VERSION_IN_USE"
    status = 409


class VersionRetired(StewardError):
    """The agent version was retired: no new task is submitted under it. Deploy a newer
    version (or un-retire it) first."""

    code = "VERSION_RETIRED"
    status = 409


class QuotaNotFound(StewardError):
    code = "QUOTA_NOT_FOUND"
    status = 404


class InvalidResourcePattern(InvalidArgument):
    """A resource that is neither an exact value nor a prefix pattern (`*` only at the end)."""

    code = "INVALID_RESOURCE_PATTERN"


class GrantNotNarrower(InvalidArgument):
    """A narrowing that would widen the grant: a resource outside the old one, or a later
    (or no) expiry where there was one."""

    code = "GRANT_NOT_NARROWER"


class AuthorityDenied(StewardError):
    """For a caller that turns a denied Decision into an exception: it names the boundary
    that enforced it, why, and the decision recorded."""

    code = "AUTHORITY_DENIED"
    status = 403

    def __init__(self, message: str, *, boundary: str, reason_code: str, decision_id: str, **details):
        super().__init__(message, boundary=boundary, reason_code=reason_code, decision_id=decision_id, **details)
        self.boundary, self.reason_code, self.decision_id = boundary, reason_code, decision_id


class CapabilityRefused(StewardError):
    """A capability token that does not prove who is calling: `reason` is one of
    wrong_audience, expired, not_yet_valid, bad_signature, malformed."""

    code = "CAPABILITY_REFUSED"
    status = 401

    def __init__(self, message: str, *, reason: str, **details):
        super().__init__(message, reason=reason, boundary="credential_gateway", **details)
        self.reason = reason


class WorkerCredentialRefused(StewardError):
    """The minting service (/gateway/tokens) could not tell which worker asks: no
    credential, a malformed one, one it does not know (or whose secret is wrong), or a
    revoked one. `reason`: missing, malformed, unknown, revoked."""

    code = "WORKER_CREDENTIAL_REFUSED"
    status = 401

    def __init__(self, message: str, *, reason: str, **details):
        super().__init__(message, reason=reason, boundary="credential_gateway", **details)


class TokenRefused(StewardError):
    """The minting service knows the worker but gives it no token for this attempt:
    `reason` is no_such_task, stale_epoch (the task has a newer attempt), no_live_attempt
    (that attempt ended), not_your_attempt (another worker's credential holds its lease),
    lease_expired, or task_stopped (the task is no longer running)."""

    code = "TOKEN_REFUSED"
    status = 403

    def __init__(self, message: str, *, reason: str, **details):
        super().__init__(message, reason=reason, boundary="credential_gateway", **details)


class WorkerCredentialNotFound(StewardError):
    code = "WORKER_CREDENTIAL_NOT_FOUND"
    status = 404


class UnknownTool(StewardError):
    """The credential gateway has no tool of that name configured (STEWARD_TOOLS)."""

    code = "UNKNOWN_TOOL"
    status = 404


class ToolPathRefused(InvalidArgument):
    """A tool path the credential gateway neither decides on nor forwards, because a
    server could read it as another path (encoded twice, `;`, `\\`, dot segments, ...):
    `reason` names the rule it breaks (runtime/gateway/paths.py, PathRefusal). Nothing
    is written and nothing is forwarded."""

    code = "TOOL_PATH_REFUSED"

    def __init__(self, message: str, *, reason: str, field: str = "path", **details):
        super().__init__(message, reason=reason, field=field, boundary="credential_gateway", **details)
        self.reason = reason


class CallInFlight(StewardError):
    """The credential gateway is still carrying an earlier send of this Idempotency-Key."""

    code = "CALL_IN_FLIGHT"
    status = 409


class GatewayNotConfigured(StewardError):
    """The credential gateway has no provider for this route (STEWARD_MODEL_URL unset)."""

    code = "GATEWAY_NOT_CONFIGURED"
    status = 503


class UpstreamFailed(StewardError):
    """The provider behind the credential gateway could not be reached, or its answer
    could not be read; the call is recorded `failed`."""

    code = "UPSTREAM_FAILED"
    status = 502


# --- Agent memory (runtime/memory/) ---------------------------------------------------


class UntrustedAuthority(StewardError):
    """Text from a model or a tool (or memory written from it) offered as authority: an
    action, a resource, a scope or an approval's `requires` (runtime/taint.py)."""

    code = "UNTRUSTED_AUTHORITY"
    status = 403


class MemoryKindUnknown(StewardError):
    """A memory kind no `@memory_kind` declares in this process."""

    code = "MEMORY_KIND_UNKNOWN"
    status = 422


class MemoryValueInvalid(StewardError):
    """A memory value that does not fit its kind's pydantic model, or is not storable JSON."""

    code = "MEMORY_VALUE_INVALID"
    status = 422


class MemoryRecordNotFound(StewardError):
    """No record (or no such version of one) of this agent in this tenant."""

    code = "MEMORY_RECORD_NOT_FOUND"
    status = 404


class MemoryConflict(StewardError):
    """Another writer made a newer version first (a rollback or an upgrade lost its
    compare-and-set): read the record again."""

    code = "MEMORY_CONFLICT"
    status = 409


class MemoryPayloadErased(StewardError):
    """The version's payload was erased (retention or erasure): only its hash remains."""

    code = "MEMORY_PAYLOAD_ERASED"
    status = 409


class MemoryUpgradeMissing(StewardError):
    """A record's schema version has no registered upgrade to the next."""

    code = "MEMORY_UPGRADE_MISSING"
    status = 422


# --- Raised inside agent code ---------------------------------------------------------


class NondeterminismError(BaseException):
    """Replay asked for a different step than the journal recorded at that seq.

    A BaseException so that agent code cannot catch it and carry on from a journal
    that no longer matches the code.
    """

    code = "NONDETERMINISM"


class DryReplayReached(BaseException):
    """A dry replay (runtime/worker/replay.py) reached the end of the recorded journal:
    the next call would run something new, so it stops there, having run nothing.

    A BaseException so that agent code cannot catch it and carry on.
    """

    code = "DRY_REPLAY_REACHED"

    def __init__(self, seq: int):
        super().__init__(f"the dry replay reached seq {seq}, past the journal")
        self.seq = seq


class NotJournalable(BaseException):
    """A step returned a value the journal cannot store (not JSON, or too large), or an
    effect was asked for with arguments that are not JSON.

    A BaseException, like NondeterminismError: the call already took its seq, so agent
    code that caught this and carried on would leave a hole in the journal that no
    later attempt could replay past.
    """

    code = "NOT_JOURNALABLE"


class StepFailed(Exception):
    """A journaled step raised. The same error is re-raised on every replay."""

    code = "STEP_FAILED"

    def __init__(self, step: str, error_type: str, message: str):
        super().__init__(f"step {step!r} raised {error_type}: {message}")
        self.step = step
        self.error_type = error_type
        self.message = message


class SpawnRefused(StepFailed):
    """ctx.spawn() could not create the child (QUEUE_FULL, unknown agent, bad input)."""

    code = "SPAWN_REFUSED"


class EffectFailed(StepFailed):
    """The service refused the effect, or an operator recorded that it did not happen."""

    code = "EFFECT_FAILED"


class EffectNotApplied(Exception):
    """Raise from an effect function when the service definitely did NOT act
    (for example it answered 4xx/5xx). Any other exception means the outcome is unknown.
    """


class Fenced(BaseException):
    """A newer attempt owns the task (or it was stopped): this attempt may write nothing.

    A BaseException so that agent code cannot swallow it and keep going.
    """

    code = "FENCED"

    def __init__(self, task_id, epoch: int, write: str):
        super().__init__(f"attempt epoch {epoch} of task {task_id} may no longer write ({write})")
        self.task_id = task_id
        self.epoch = epoch
        self.write = write


class StopRequested(BaseException):
    """A stop reached this attempt while agent code ran (runtime/worker/stop_watch.py
    delivers it into the running step), or the credential gateway cut a call because
    the task was stopped (TASK_STOPPED). The executor ends the attempt and acknowledges
    the stop at the worker boundary (runtime/worker/executor.py).

    A BaseException so that an agent's `except Exception` does not swallow it. Agent
    code that catches it anyway (`except BaseException`) and returns still ends at its
    next write: every write of a stopped task is fenced.
    """

    code = "TASK_STOPPED"

    def __init__(self, task_id, epoch: int, where: str):
        super().__init__(f"task {task_id} was stopped (attempt epoch {epoch}, seen {where})")
        self.task_id = task_id
        self.epoch = epoch
        self.where = where


class InfrastructureError(BaseException):
    """The database failed under an attempt: a lost connection, a server restart, a
    server-side timeout (runtime/db.py CONNECTION_ERRORS). Not the agent's error, so it
    never fails the task: the attempt yields and the task is retried, or recovered once
    its lease lapses.

    A BaseException so that an agent's `except Exception` around a ctx call cannot
    swallow it and carry on past a write that may not have happened.
    """

    code = "INFRASTRUCTURE"

    def __init__(self, cause: BaseException):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


class Suspend(BaseException):
    """Ends an attempt without finishing the task (sleep, wait, blocked effect).

    A BaseException so that an agent's `except Exception` cannot swallow it.
    """

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


# --- Approvals (runtime/approvals/) ------------------------------------------------------


class ApprovalNotFound(StewardError):
    """No approval with that id in the caller's tenant: never ignored."""

    code = "APPROVAL_NOT_FOUND"
    status = 404


class ApprovalAlreadyDecided(StewardError):
    """A decision is single-use: this package was approved, denied, expired or found
    stale before (details.state says which). Of two concurrent decisions, the second
    gets this."""

    code = "APPROVAL_ALREADY_DECIDED"
    status = 409


class ApprovalStale(StewardError):
    """An approve found that what the package is bound to has changed since the agent
    asked: the tenant's authz_revision, the policy_version or the task's input digest
    (`changed`: each one's {"before", "after"}). The package is now `stale`, as the
    executor's re-check would have found it, and its task goes on to its stale branch
    (the agent may ask again); it can never be approved."""

    code = "APPROVAL_STALE"
    status = 409


class ApprovalRequiresPerson(StewardError):
    """Only a person (user:<name>) decides an approval: never an agent, a task or a worker."""

    code = "APPROVAL_REQUIRES_PERSON"
    status = 403


class SelfApprovalRefused(StewardError):
    """Separation of duties (STEWARD_APPROVAL_SEPARATION_OF_DUTIES): the person who started
    the task cannot approve its requests."""

    code = "SELF_APPROVAL_REFUSED"
    status = 403


# --- Triggers (runtime/triggers/) ----------------------------------------------------------


class InvalidCron(InvalidArgument):
    """A cron expression that does not parse, or never fires."""

    code = "INVALID_CRON"


class InvalidTimezone(InvalidArgument):
    code = "INVALID_TIMEZONE"


class ScheduleNotFound(StewardError):
    code = "SCHEDULE_NOT_FOUND"
    status = 404


class WebhookNotFound(StewardError):
    code = "WEBHOOK_NOT_FOUND"
    status = 404


class TriggerNotFound(StewardError):
    code = "TRIGGER_NOT_FOUND"
    status = 404


class SignatureMissing(StewardError):
    """A webhook delivery without its signature, timestamp or delivery id header."""

    code = "SIGNATURE_MISSING"
    status = 401


class SignatureInvalid(StewardError):
    """The HMAC does not match this webhook's secret (or the webhook does not exist:
    the two are not told apart, so ids cannot be probed)."""

    code = "SIGNATURE_INVALID"
    status = 401


class TimestampOutOfRange(StewardError):
    code = "TIMESTAMP_OUT_OF_RANGE"
    status = 401


class DeliveryReplayed(StewardError):
    """This delivery id was already accepted with a different body."""

    code = "DELIVERY_REPLAYED"
    status = 409


class WebhookPaused(StewardError):
    code = "WEBHOOK_PAUSED"
    status = 409


class BreakerTripped(StewardError):
    """A fan-out or runaway breaker (runtime/limits/breakers.py) refused what the agent
    asked for next: `breaker` is its stable code (states.BREAKERS), with the limit in
    force and what was observed. Raised inside a ctx call; the attempt then ends `trip`
    and the task is blocked until an operator resumes it (task_resume), usually with a
    raised limit. Sticky for the attempt, like AuthorityDenied."""

    code = "BREAKER_TRIPPED"
    status = 409

    def __init__(self, message: str, *, breaker: str, limit: int, observed: int | float, **details):
        super().__init__(message, breaker=breaker, limit=limit, observed=observed, **details)
        self.breaker, self.limit, self.observed = breaker, limit, observed


class TreePaused(BreakerTripped):
    """The task's tree is paused: a fan-out breaker tripped at `tripped_task`, and until an
    operator lifts the pause (task_resume of a task in the tree) no task of the tree
    takes a new step or spawns (runtime/limits/pauses.py). `breaker`, `limit` and
    `observed` are the trip's. The attempt ends `pause` and the task is blocked
    (`tree_paused`); nothing of the refused call was journaled."""

    code = "TREE_PAUSED"
    status = 409

    def __init__(
        self, message: str, *, pause_id: int, tripped_task: str, breaker: str, limit: int, observed: int | float
    ):
        super().__init__(
            message, breaker=breaker, limit=limit, observed=observed, pause_id=pause_id, tripped_task=tripped_task
        )
        self.pause_id, self.tripped_task = pause_id, tripped_task


# --- Lifecycle: retention and erasure (runtime/lifecycle/) ---------------------------------


class ErasureSubjectLive(StewardError):
    """An erasure names tasks that have not finished: their payloads are still in use
    (a replay reads its journal). Stop them first, then erase."""

    code = "ERASURE_SUBJECT_LIVE"
    status = 409


class ErasureReceiptNotFound(StewardError):
    code = "ERASURE_RECEIPT_NOT_FOUND"
    status = 404
