"""The context an agent receives: its only way to do nondeterministic or outside work.

Every call takes the next `seq`. On replay (a later attempt of the same task) a call
whose seq is already journaled returns the recorded output, or re-raises the recorded
error, without running anything; a call whose name or kind differs from the journal
means the code no longer replays deterministically and fails the task.
"""

from __future__ import annotations

import functools
import json
import random
import time
import uuid
from datetime import UTC, datetime

from runtime import db, encoding, faults, states
from runtime.approvals import request as approvals
from runtime.approvals.request import ApprovalResult
from runtime.attempts import interrupts, journal, timers
from runtime.attempts.journal import JournalCall, Recorded, replay_or_run
from runtime.attempts.lease import Lease
from runtime.effects import ledger
from runtime.errors import (
    AuthorityDenied,
    BreakerTripped,
    DryReplayReached,
    InfrastructureError,
    NondeterminismError,
    NotJournalable,
    StepFailed,
)
from runtime.gateway import client as gateway
from runtime.limits import breakers
from runtime.memory.agent import AgentMemory
from runtime.tasks import children
from runtime.tasks.children import ChildResult
from runtime.worker import authority


def _not_the_agents_error(method):
    """A lost database connection inside a ctx call becomes InfrastructureError, which
    agent code cannot catch with `except Exception`: the executor yields the attempt
    instead of failing the task (runtime/worker/executor.py). An AuthorityDenied or a
    BreakerTripped (TreePaused is one) is kept on the context as `halt`, and every
    later ctx call raises it again."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        if self.halt is not None:
            raise self.halt  # sticky: nothing more is journaled after a denial or a breaker's refusal
        try:
            # Steward's own work: a stop is not delivered in the middle of it (runtime/attempts/interrupts.py).
            with interrupts.region(interrupts.STEWARD):
                return method(self, *args, **kwargs)
        except db.CONNECTION_ERRORS as exc:
            raise InfrastructureError(exc) from exc
        except (AuthorityDenied, BreakerTripped) as exc:
            # Whoever raised it (ctx.authorize, an effect's requires, a gateway call, a
            # breaker, the tree's pause), the attempt ends blocked (`deny`, `trip` or
            # `pause`) even if agent code catches it (runtime/worker/executor.py _halt).
            self.halt = exc
            raise

    return guarded


# The value is journaled, so no seed is needed for replay; a generator of its own keeps
# agent code from moving the `random` module's shared sequence for the rest of the process.
_RANDOM = random.Random()


# The journal kinds whose replay, at the end of the journal, goes on waiting (a sleep not
# yet due, children not yet done, an approval not yet decided): a write. A dry replay
# stops at such a row once its name and kind matched.
_WAITS = frozenset(
    {states.StepKind.SLEEP, states.StepKind.WAIT, states.StepKind.APPROVAL, states.StepKind.APPROVAL_CHECK}
)

PATCH_PREFIX = "patch:"


class Context:
    def __init__(
        self,
        lease: Lease,
        *,
        agent: str,
        owner: str,
        root_id,
        reason: str,
        journal_rows: list[Recorded],
        dry: bool = False,
    ):
        self.lease = lease
        self.task_id = lease.task_id
        self.tenant = lease.tenant
        self.owner = owner
        self.agent = agent
        self.root_id = root_id
        self.parent_id = lease.parent_id
        self.epoch = lease.epoch
        self.attempt_reason = reason
        self._journal = journal_rows
        self._seq = 0
        # A dry replay (runtime/worker/replay.py): match the code's calls against the
        # journal, return what was recorded, and stop (DryReplayReached) before anything
        # would run or be written.
        self.dry = dry
        self._patches: dict[str, bool] = {}  # ctx.patched(): each name decided once per attempt
        self._matched = 0  # journal rows matched so far (a dry replay reports it)
        # The first denial or breaker's refusal (a tree's pause included): the task ends blocked.
        self.halt: AuthorityDenied | BreakerTripped | None = None
        self._breakers = breakers.StepBreakers(lease, agent, root_id)  # checked before each new step
        # ctx.memory: this agent's memory in this tenant (runtime/memory/agent.py), each call
        # a journaled step taken through _memory_call.
        self.memory = AgentMemory(self, self._memory_call)

    # --- journaled calls -------------------------------------------------------------

    @_not_the_agents_error
    def step(self, name: str, fn, *args, **kwargs):
        """Run fn(*args, **kwargs) once per task; its JSON output is journaled."""
        call = self._next(name, states.StepKind.STEP)
        return replay_or_run(call, replay=_replay, run=lambda call: self._run(call, fn, args, kwargs))

    @_not_the_agents_error
    def now(self) -> datetime:
        """The time, journaled: a replay sees the same clock reading. It is the database's
        clock, which timers and every stored time read too (a deadline computed from
        ctx.now() and passed to sleep_until() means what it says on any worker)."""
        call = self._next("now", states.StepKind.NOW)
        return _utc(replay_or_run(call, replay=_replay, run=lambda call: self._run(call, _database_now, (), {})))

    @_not_the_agents_error
    def random(self) -> float:
        """A random float in [0, 1), journaled."""
        call = self._next("random", states.StepKind.RANDOM)
        return replay_or_run(call, replay=_replay, run=lambda call: self._run(call, _RANDOM.random, (), {}))

    @_not_the_agents_error
    def effect(
        self,
        name: str,
        fn,
        *args,
        effect_class: str,
        key: str | None = None,
        keyed: bool = False,
        requires: tuple[str, str] | None = None,
        **kwargs,
    ):
        """An action on the outside world, through the effect ledger (runtime/effects/ledger.py).

        fn is called as fn(*args, idempotency_key=key, **kwargs) and should pass the key
        to the service. `keyed=True` declares that the service deduplicates by that key,
        which lets recovery re-send a reversible effect; otherwise an interrupted effect
        becomes `unknown` and waits for an operator. `requires=(action, resource)`: the
        authority it needs, checked on current rows before its intent is written and
        before a recovered attempt re-sends it (never on replay of a settled one); a
        denial raises AuthorityDenied and the task ends blocked.
        """
        if effect_class not in states.EFFECT_CLASSES:
            raise ValueError(f"effect_class must be one of {states.EFFECT_CLASSES}")
        needed = authority.need(requires) if requires is not None else None
        call = self._next(name, states.StepKind.EFFECT)
        before = (lambda: authority.check(self, *needed)) if needed else None
        return replay_or_run(
            call,
            replay=ledger.replayed,
            run=lambda call: ledger.perform(
                self, call, fn, args, kwargs, effect_class=effect_class, key=key, keyed=keyed, before_send=before
            ),
        )

    @_not_the_agents_error
    def authorize(self, action: str, resource: str):
        """Whether this task may take `action` on `resource` now, on current rows, at the
        executor boundary: the recorded Decision, or AuthorityDenied (the task then ends
        blocked). Not journaled: a replay asks again. A dry replay decides nothing and
        records nothing: it answers an unsaved allow, since what it checks is only that
        the code asks for the journal's steps in order."""
        needed = authority.need((action, resource))
        if self.dry:
            return authority.dry_allow(self, *needed)
        return authority.check(self, *needed)

    # --- human review (runtime/approvals/) -------------------------------------------------

    @_not_the_agents_error
    def request_approval(
        self,
        action: dict,
        *,
        effect_class: str,
        expires_in: float,
        precondition=None,
        requires: tuple[str, str] | None = None,
        name: str = "approval",
    ) -> ApprovalResult:
        """Ask a person to approve `action` (a JSON object: what the agent means to do,
        laid out for the reviewer) and wait durably for the decision: the attempt ends
        and holds no worker and no slot until a person decides or it expires.

        `precondition`: a callable returning what the target looks like now (an ETag,
        a version), or such a value. `requires=(action, resource)`: the authority the
        action needs, checked now and again before an approval is returned. Returns an
        ApprovalResult: `.approved` only when, on this attempt, the action's hash, the
        context digest (task input, precondition, policy_version, authz_revision) and
        authority are unchanged since the request; `.expired` (expiry means deny),
        `.denied`, or `.stale` (ask again, under another name). Journaled: a replay
        returns the same result without asking again, so act on an approval once."""
        spec = {
            "action": action,
            "effect_class": effect_class,
            "expires_in": expires_in,
            "precondition": precondition,
            "requires": requires,
        }
        return self.request_approvals([spec], name=name)[0]

    @_not_the_agents_error
    def request_approvals(self, requests: list[dict], *, name: str = "approvals") -> list[ApprovalResult]:
        """Ask for several approvals at once, each its own package with its own id, decided
        on its own (one approved, another denied, another expired); wait durably until all
        are decided and return their results in order. Each request is {action,
        effect_class, expires_in, precondition?, requires?}, as for request_approval()."""
        for spec in requests if isinstance(requests, list) else []:
            if isinstance(spec, dict) and spec.get("requires") is not None:
                authority.check(self, *authority.need(spec["requires"]))
        ask = self._next(name, states.StepKind.APPROVAL)
        check = self._next(name, states.StepKind.APPROVAL_CHECK)
        return approvals.request(self, ask, check, specs=requests)

    # --- the credential gateway (runtime/gateway/client.py) -----------------------------

    @_not_the_agents_error
    def model(self, messages: list, *, model: str, stream: bool = False, name: str | None = None, **params):
        """A chat completion through the credential gateway, as a keyed effect (a replay
        returns the journaled reply; nothing is sent again). Returns the reply's text as
        `UntrustedText`: data from a model, never an instruction. AuthorityDenied, naming
        its boundary, if the task's current authority does not allow `model.call` on
        `model:<model>`, or stops allowing it while the reply streams."""
        call = self._next(name or f"model:{model}", states.StepKind.EFFECT)
        return gateway.model(self, call, messages, model=model, stream=stream, params=params)

    @_not_the_agents_error
    def tool(
        self, name: str, method: str, path: str, json=None, *, effect_class: str | None = None, step: str | None = None
    ) -> dict:
        """Call the outside API `name` (configured on the web side) through the gateway, as
        a keyed effect: GET and HEAD are `read`, other methods `idempotent` unless
        `effect_class` says otherwise. Returns {"untrusted": true, "status", "body", ...}."""
        if effect_class is not None and effect_class not in states.EFFECT_CLASSES:
            raise ValueError(f"effect_class must be one of {states.EFFECT_CLASSES}")
        label = step or f"tool:{name}"
        call = self._next(label, states.StepKind.EFFECT)
        return gateway.tool(self, call, name, method, path, json, effect_class)

    # --- durable timers (runtime/attempts/timers.py) -----------------------------------

    @_not_the_agents_error
    def sleep(self, seconds: float) -> None:
        """Sleep durably: the attempt ends and holds no worker and no slot until then."""
        timers.sleep(self.lease, self._next("sleep", states.StepKind.SLEEP), seconds=float(seconds))

    @_not_the_agents_error
    def sleep_until(self, when: datetime) -> None:
        if when.tzinfo is None:
            raise ValueError("sleep_until needs an aware datetime")
        timers.sleep(self.lease, self._next("sleep", states.StepKind.SLEEP), until=when)

    # --- children (runtime/tasks/children.py) -------------------------------------------

    @_not_the_agents_error
    def spawn(self, agent: str, input: dict, *, scope=None) -> uuid.UUID:
        """Create a child task (same tenant and owner) and return its id. Children are
        tasks in their own right: addressable, cancellable and audited on their own.
        `scope`: [(action, resource), ...] (or {"action", "resource"} dicts; a resource
        may be a prefix pattern), what the child asks for. Its authority is that, met
        with its own agent's and owner's grants and its parent's authority, read again
        on every check; None asks for whatever the parent holds."""
        requested = authority.scope(scope)
        return children.spawn(
            self.lease,
            self._next(f"spawn:{agent}", states.StepKind.SPAWN),
            agent=agent,
            input=input,
            owner=self.owner,
            root_id=self.root_id,
            limits=self._breakers.load(),
            requested_scope=requested,
        )

    @_not_the_agents_error
    def wait(self, tasks) -> list[ChildResult]:
        """Wait durably until every child is terminal; results follow the given order.
        While any is still live the attempt ends and holds no worker and no slot."""
        return children.wait(self.lease, self._next("wait", states.StepKind.WAIT), tasks)

    @property
    def replayed(self) -> int:
        """How many journal rows this attempt's calls have matched so far."""
        return self._matched

    # --- patch markers (docs/adr/0037-agent-versions.md) -------------------------------------

    @_not_the_agents_error
    def patched(self, name: str) -> bool:
        """Whether this task takes the new path of the patch `name`, as Temporal's
        workflow.patched does:

            if ctx.patched("greet-twice"):
                ctx.step("greet", greet); ctx.step("greet again", greet)
            else:
                ctx.step("greet", greet)

        A task running new code past the end of its journal takes the new path, and a
        marker `patch:<name>` is journaled at this seq. A replay that finds the marker
        here takes it again; a replay that finds any other row here ran this point with
        the code from before the patch, so it takes the old path (nothing journaled).
        The answer is fixed for the rest of the attempt, and is the same on every replay."""
        arguments_ok = isinstance(name, str) and 0 < len(name) <= 200 - len(PATCH_PREFIX)
        if not arguments_ok:
            raise ValueError("patch names are 1-194 characters")
        if name in self._patches:
            return self._patches[name]
        marker = PATCH_PREFIX + name
        seq = self._seq
        if seq < len(self._journal):
            recorded = self._journal[seq]
            taken = recorded.kind == states.StepKind.PATCH and recorded.name == marker
            if taken:
                self._seq += 1  # the marker's seq, replayed
                self._matched += 1
            self._patches[name] = taken
            return taken
        call = self._next(marker, states.StepKind.PATCH)  # new ground: the new path, journaled
        self._run(call, _true, (), {})
        self._patches[name] = True
        return True

    @_not_the_agents_error
    def deprecate_patch(self, name: str) -> None:
        """The patch `name` is deprecated: the code keeps only its new path, and this call
        stands where `ctx.patched(name)` stood. A replay that finds the marker here steps
        over it; a new task journals nothing. Deploy it once no unfinished task took the
        old path (`steward versions patch AGENT NAME` counts them), then remove the call
        once no unfinished task has the marker either."""
        if not isinstance(name, str) or not name:
            raise ValueError("patch names are 1-194 characters")
        seq = self._seq
        if seq < len(self._journal):
            recorded = self._journal[seq]
            if recorded.kind == states.StepKind.PATCH and recorded.name == PATCH_PREFIX + name:
                self._seq += 1
                self._matched += 1
        self._patches[name] = True

    # --- agent memory (runtime/memory/agent.py) ------------------------------------------

    @_not_the_agents_error
    def _memory_call(self, name: str, run):
        """One ctx.memory call: its seq, under the guards every ctx call has; `run(call)`
        replays the journaled outcome or does the work and journals it."""
        return run(self._next(name, states.StepKind.MEMORY))

    # --- internals -------------------------------------------------------------------------

    def _next(self, name: str, kind: states.StepKind) -> JournalCall:
        """The call's place in the journal: a new seq (the breakers checked first), or the
        journaled one it replays, which must be the same name and kind."""
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ValueError("step names are 1-200 characters")
        seq = self._seq
        self._seq += 1
        if seq >= len(self._journal):
            if self.dry:
                raise DryReplayReached(seq)  # the next call would run something new: stop here
            # A new step: the runaway breakers and the tree's pause first (BreakerTripped,
            # TreePaused). A replayed one is never refused, so a resume replays what ran.
            self._breakers.check(seq)
            return JournalCall(seq, name, kind)
        recorded = self._journal[seq]
        if recorded.name != name or recorded.kind != kind:
            raise NondeterminismError(
                f"replay of task {self.task_id} diverged at step {seq}: the journal has "
                f"{recorded.kind} {recorded.name!r}, the code asked for {kind} {name!r}"
            )
        self._matched += 1
        if self.dry and seq == len(self._journal) - 1 and kind in _WAITS:
            raise DryReplayReached(seq)  # its replay would go on waiting, and write that it does
        return JournalCall(seq, name, kind, recorded)

    def _run(self, call: JournalCall, fn, args, kwargs):
        seq, name, kind = call.seq, call.name, call.kind
        started = time.monotonic()
        try:
            with interrupts.region(interrupts.AGENT):  # the step's own code: a stop interrupts it
                value = fn(*args, **kwargs)
        except Exception as exc:
            error = encoding.error_record(exc)
            journal.write(self.lease, seq=seq, name=name, kind=kind, error=error, started=started)
            raise StepFailed(name, error["type"], error["message"]) from exc
        try:
            text = encoding.encode(value, what="its output")
        except NotJournalable as exc:
            raise NotJournalable(f"step {name!r} returned a value the journal cannot store: {exc}") from None
        faults.reach(faults.BEFORE_STEP_JOURNAL, task_id=self.task_id, step=name, epoch=self.epoch)
        journal.write(self.lease, seq=seq, name=name, kind=kind, output=text, started=started)
        faults.reach(faults.BETWEEN_STEPS, task_id=self.task_id, step=name, epoch=self.epoch)
        # Hand back what a replay would: the JSON round trip (tuples become lists).
        return json.loads(text)


def _true() -> bool:
    return True


def _replay(recorded: Recorded):
    if recorded.error is not None:
        raise StepFailed(recorded.name, recorded.error["type"], recorded.error["message"])
    return recorded.output


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def _database_now() -> float:
    clock = db.fetchone("clock", {"seconds": 0}, row=db.Clock)
    assert clock is not None  # the statement always answers one row
    return clock.now
