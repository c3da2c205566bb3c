"""Reads of stops for the API, the CLI and the console: a stop's summary (what each
boundary answered for each task, what happened before the stop, what is still unknown)
and the preview of what a stop would cover. Nothing here writes.

Tenant-scoped like every read the web side makes: another tenant's stop is
STOP_NOT_FOUND and another tenant's task TASK_NOT_FOUND, never a 403 that tells a
stranger the id exists. Every list is capped, with the number left off stated, so a
stop of a 10,000-task agent reads as cheaply as one of a single task.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from django.db.models import Count, Max, OuterRef, Q, Subquery, Value
from django.db.models.functions import Now
from django.utils import timezone

from runtime import arguments, config, states
from runtime.audit import AuditKind, chain_of
from runtime.errors import StopNotFound
from runtime.models import AgentSwitch, AuditEvent, Effect, GatewayCall, Stop, StopAck, Task
from runtime.tasks.selectors import SUBTREE_MAX, task_get, task_subtree_live

TASKS_SHOWN = 200  # a summary's per-task rows (four each); the rest are counted
EFFECTS_SHOWN = 50  # each list of effects and of gateway calls
PREVIEW_SHOWN = 200  # a preview's tasks


class AckState(StrEnum):
    """Where one boundary's acknowledgment of one task's stop stands, in the words the
    console, the API and the CLI show."""

    ACKNOWLEDGED = "acknowledged"  # the boundary answered while the task was stopping
    WAITING = "waiting"  # not yet, and the task is still stopping
    MISSING = "missing"  # never: the task was cancelled (by its bound) without it
    LATE = "late"  # it answered after the task was cancelled by its bound


ROW_STATES = tuple(state.value for state in AckState)  # as plain text, for the API's schema

# Effects whose outcome nobody knows yet: an intent recorded (the call may be under way),
# a stream cut part-way (partial: its receipt says what came), or unknown (a person decides).
EFFECTS_OPEN = (states.INTENT, states.PARTIAL, states.UNKNOWN)
# Gateway calls whose outcome nobody knows yet, or that were cut part-way (an unkeyed
# one cut is `unknown`: no key to send it again by).
CALLS_UNRESOLVED = ("admitted", "partial", "unknown")


@dataclass(frozen=True)
class BoundaryRow:
    task_id: uuid.UUID
    boundary: str
    state: AckState
    at: datetime | None  # when it acknowledged
    by: str  # the process or service that did
    detail: dict  # what it reported


@dataclass
class TaskStop:
    """One task under the stop: its four boundaries, and where it stands."""

    task: Task
    rows: list[BoundaryRow]
    deadline: datetime | None  # when the stop stops waiting for it (None: no longer known, it left the stop)
    bound_passed: bool
    cancelled_at: datetime | None  # when this stop cancelled it (None: still stopping, or it left the stop)
    left: bool  # it is under this stop no more (resumed, or stopped again later)

    @property
    def missing(self) -> list[str]:
        return [r.boundary for r in self.rows if r.state == AckState.MISSING]

    @property
    def waiting(self) -> list[str]:
        return [r.boundary for r in self.rows if r.state == AckState.WAITING]


@dataclass
class Capped:
    """The first items of a list and how many were left off."""

    items: list
    more: int = 0

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class StopSummary:
    stop: Stop
    read_at: datetime
    over: bool  # every task it covers is cancelled (stop.finished_at)
    task_count: int  # every task it covers
    stopping: int  # of them, still waiting for a boundary
    tasks: list[TaskStop]  # the first TASKS_SHOWN, in id order (parents before their children)
    tasks_more: int  # left off
    acks: int  # acknowledgments recorded, over every task
    counts: dict[str, int]  # rows by state, over the tasks shown
    last_ack_at: datetime | None
    committed_before: Capped  # effects the stop's tasks committed before it was requested
    in_flight: Capped  # effects with no known outcome: intent, partial or unknown
    settled_since: Capped  # effects that settled (committed or failed) after the request
    calls: Capped  # gateway calls still admitted (no answer) or cut part-way (partial, or unknown if unkeyed)
    unresolved: list[str] = field(default_factory=list)  # in words: what the stop leaves open

    @property
    def to_last_ack(self) -> timedelta | None:
        """From the request to the last acknowledgment so far."""
        return self.last_ack_at - self.stop.requested_at if self.last_ack_at else None

    @property
    def complete(self) -> bool:
        """Every boundary of every task acknowledged."""
        return self.acks >= 4 * self.task_count

    @property
    def outcome_words(self) -> str:
        if not self.task_count:
            return "nothing was live"
        if not self.over:
            return "stopping"
        return "cancelled" if self.stop.outcome == states.StopOutcome.ACKNOWLEDGED else "cancelled at its bound"


def stop_get(*, stop_id, tenant: str) -> Stop:
    """The stop, or STOP_NOT_FOUND (another tenant's too, and a malformed id)."""
    arguments.tenant(tenant)
    try:
        stop = Stop.objects.filter(id=stop_id, tenant=tenant).first()
    except Exception:
        stop = None
    if stop is None:
        raise StopNotFound(f"no stop {stop_id}", stop=str(stop_id))
    return stop


def task_latest_stop(*, task_id, tenant: str) -> Stop:
    """The task's current stop, or the latest it was under (a resume clears Task.stop;
    its acknowledgments still name it). STOP_NOT_FOUND if it was never stopped."""
    task = task_get(task_id, tenant=tenant)
    stop_id = task.stop_id or (
        StopAck.objects.filter(task_id=task.id).order_by("-stop_id").values_list("stop_id", flat=True).first()
    )
    if stop_id is None:
        raise StopNotFound(f"task {task.id} was never stopped", task=str(task.id))
    return Stop.objects.get(id=stop_id)


def stop_summary(*, stop_id=None, task_id=None, tenant: str) -> StopSummary:
    """What a stop did, read now.

    1. Find the stop: by id, or the task's latest.
    2. Its tasks are those its boundaries acknowledged: every one it covers has a
       storage acknowledgment from the stop's own transaction. The first TASKS_SHOWN, in
       id order (a parent is created before its children), with their acknowledgments.
    3. Each task's four rows: acknowledged, waiting (still stopping), missing (cancelled
       at its bound without it) or late (it came after that).
    4. The effects of those tasks: committed before the request, still without an
       outcome, settled since; the gateway calls unanswered or cut.
    """
    if (stop_id is None) == (task_id is None):
        raise ValueError("name a stop or a task")
    stop = (
        stop_get(stop_id=stop_id, tenant=tenant)
        if stop_id is not None
        else task_latest_stop(task_id=task_id, tenant=tenant)
    )
    now = timezone.now()
    totals = StopAck.objects.filter(stop=stop).aggregate(
        acks=Count("id"), tasks=Count("id", filter=Q(boundary=states.STORAGE)), last=Max("at")
    )
    ids = list(
        StopAck.objects.filter(stop=stop, boundary=states.STORAGE)
        .order_by("task_id")
        .values_list("task_id", flat=True)[:TASKS_SHOWN]
    )
    tasks = {t.id: t for t in Task.objects.filter(id__in=ids)}
    acks: dict = {}
    for ack in StopAck.objects.filter(stop=stop, task_id__in=ids):
        acks[(ack.task_id, ack.boundary)] = ack
    cancels = _cancels(stop, [tasks[i] for i in ids])
    shown = [_task_stop(stop, tasks[i], acks, cancels.get(i), now) for i in ids]
    counts = dict.fromkeys(ROW_STATES, 0)
    for one in shown:
        for row in one.rows:
            counts[row.state] += 1
    all_ids = StopAck.objects.filter(stop=stop, boundary=states.STORAGE).values("task_id")
    effects = Effect.objects.filter(task_id__in=all_ids)
    summary = StopSummary(
        stop=stop,
        read_at=now,
        # A kill switch with no live task covers none: over at once (nothing is left to settle).
        over=stop.finished_at is not None or not totals["tasks"],
        task_count=totals["tasks"],
        stopping=Task.objects.filter(stop=stop, status=states.STOPPING).count(),
        tasks=shown,
        tasks_more=max(0, totals["tasks"] - len(shown)),
        acks=totals["acks"],
        counts=counts,
        last_ack_at=totals["last"],
        committed_before=_capped(
            effects.filter(state=states.COMMITTED, settled_at__lt=stop.requested_at).order_by("-id")
        ),
        in_flight=_capped(effects.filter(state__in=EFFECTS_OPEN).order_by("id")),
        settled_since=_capped(
            effects.filter(
                state__in=(states.COMMITTED, states.EFFECT_FAILED), settled_at__gte=stop.requested_at
            ).order_by("id")
        ),
        calls=_capped(GatewayCall.objects.filter(task_id__in=all_ids, outcome__in=CALLS_UNRESOLVED).order_by("id")),
    )
    summary.unresolved = _unresolved(summary)
    return summary


def stop_live_version(*, stop_id, tenant: str) -> str:
    """A digest of what the stop panel shows, read in one statement: the stop's row; its
    acknowledgments (how many, the latest); its tasks' last change; how many are still
    stopping, and how many of those are past their bound (by the clock alone); its
    tasks' effects (how many, how many without an outcome or unknown, the last settled)
    and their unresolved gateway calls. A live poll compares it with the one the browser
    shows and reads the summary only when they differ (console/ui/stops.py).
    STOP_NOT_FOUND as stop_get."""
    arguments.tenant(tenant)
    me = OuterRef("id")
    covered = StopAck.objects.filter(stop_id=OuterRef(OuterRef("id")), boundary=states.STORAGE).values("task_id")
    stopping = Task.objects.filter(stop_id=me, status=states.STOPPING)
    effects = Effect.objects.filter(task_id__in=covered)
    try:
        found = (
            Stop.objects.filter(id=stop_id, tenant=tenant)
            .annotate(
                v_acks=_one(StopAck.objects.filter(stop_id=me), Count("id")),
                v_last=_one(StopAck.objects.filter(stop_id=me), Max("at")),
                v_tasks=_one(Task.objects.filter(id__in=covered), Max("updated_at")),
                v_stopping=_one(stopping, Count("id")),
                v_passed=_one(stopping.filter(stop_deadline__lte=Now()), Count("id")),
                v_effects=_one(effects, Count("id")),
                v_open=_one(effects, Count("id", filter=Q(state__in=EFFECTS_OPEN))),
                v_unknown=_one(effects, Count("id", filter=Q(state=states.UNKNOWN))),
                v_settled=_one(effects, Max("settled_at")),
                v_calls=_one(
                    GatewayCall.objects.filter(task_id__in=covered, outcome__in=CALLS_UNRESOLVED), Count("id")
                ),
            )
            .values(
                "finished_at",
                "outcome",
                "v_acks",
                "v_last",
                "v_tasks",
                "v_stopping",
                "v_passed",
                "v_effects",
                "v_open",
                "v_unknown",
                "v_settled",
                "v_calls",
            )
            .first()
        )
    except Exception:
        found = None  # a malformed id
    if found is None:
        raise StopNotFound(f"no stop {stop_id}", stop=str(stop_id))
    return hashlib.sha256("|".join(map(str, found.values())).encode()).hexdigest()[:16]


def _one(rows, value) -> Subquery:
    """One aggregate over all of `rows`, as a value of the outer row."""
    return Subquery(rows.order_by().values(whole=Value(1)).annotate(v=value).values("v")[:1])


def _task_stop(stop: Stop, task: Task, acks: dict, cancel, now) -> TaskStop:
    """`cancel` is this stop's task.cancelled audit event of the task (None while it is
    stopping): its `missing` names the boundaries that had not answered by then, so an
    acknowledgment of one of them came late. (The event, not a comparison of times: an
    acknowledgment's `at` is its statement's time, the cancel's its transaction's.)"""
    under = task.stop_id == stop.id
    deadline = task.stop_deadline if under else None
    stopping = under and task.status == states.STOPPING
    missing_then = set(cancel.data.get("missing", ())) if cancel is not None else set()
    rows = []
    for boundary in states.STOP_BOUNDARIES:
        ack = acks.get((task.id, boundary))
        if ack is not None:
            state = AckState.LATE if boundary in missing_then else AckState.ACKNOWLEDGED
            rows.append(BoundaryRow(task.id, boundary, state, ack.at, ack.by, ack.detail))
        else:
            rows.append(
                BoundaryRow(task.id, boundary, AckState.WAITING if stopping else AckState.MISSING, None, "", {})
            )
    cancelled_at = (
        task.finished_at if under and task.status == states.CANCELLED else cancel.at if cancel is not None else None
    )
    return TaskStop(
        task=task,
        rows=rows,
        deadline=deadline,
        bound_passed=bool(deadline and deadline <= now) or bool(missing_then),
        cancelled_at=cancelled_at,
        left=not under,
    )


def _cancels(stop: Stop, tasks: list) -> dict:
    """This stop's task.cancelled audit event of each task it no longer holds stopping,
    by task: one statement, each task's chain off its index (audit_chain_seq)."""
    done = [t for t in tasks if not (t.stop_id == stop.id and t.status == states.STOPPING)]
    if not done:
        return {}
    chains = Q()
    for task in done:
        chains |= Q(chain=chain_of(task_id=task.id, tenant=task.tenant))
    return {
        event.task_id: event
        for event in AuditEvent.objects.filter(chains, kind=AuditKind.TASK_CANCELLED, data__stop=str(stop.id)).only(
            "task_id", "at", "data"
        )
    }


def _capped(query, shown: int = EFFECTS_SHOWN) -> Capped:
    items = list(query[: shown + 1])
    if len(items) <= shown:
        return Capped(items)
    return Capped(items[:shown], query.count() - shown)


def _unresolved(summary: StopSummary) -> list[str]:
    """What the stop leaves open, in words: never more than it knows."""
    out = []
    missing = summary.counts[AckState.MISSING]
    if missing:
        out.append(f"{missing} acknowledgment{'s' if missing != 1 else ''} never came before the bound")
    if summary.counts[AckState.WAITING]:
        out.append(
            f"{summary.counts[AckState.WAITING]} acknowledgment{'s' if summary.counts[AckState.WAITING] != 1 else ''} still awaited"
        )
    n = len(summary.in_flight) + summary.in_flight.more
    if n:
        out.append(
            f"{n} effect{'s' if n != 1 else ''} with no known outcome (intent, partial or unknown): "
            f"a person may have to reconcile {'them' if n != 1 else 'it'}"
        )
    calls = len(summary.calls) + summary.calls.more
    if calls:
        out.append(f"{calls} gateway call{'s' if calls != 1 else ''} unanswered or cut part-way")
    return out


# --- Before a stop --------------------------------------------------------------------


@dataclass
class StopPreview:
    """What a stop would cover, read now: the number shown is the one the stop will
    record unless a task starts or finishes in between."""

    tasks: Capped  # live tasks a stop would move to stopping
    already_stopping: Capped  # live, but stopping under an earlier stop: left to it
    in_flight: Capped  # their effects with no outcome yet (intent, partial or unknown)
    calls: Capped  # their gateway calls in flight now (the gateway cuts them)
    limits: str = (
        "effects already committed are not undone; a call already sent may still land, and is "
        "reported unresolved; a cancelled task runs again only by an explicit resume or a new run"
    )

    @property
    def count(self) -> int:
        return len(self.tasks) + self.tasks.more


def stop_preview(*, task_id, tenant: str) -> StopPreview:
    """What task_stop of this task would cover: it and its live descendants (the same
    walk a confirmation page showed for a cancel), their effects without an outcome
    and their gateway calls in flight."""
    task = task_get(task_id, tenant=tenant)
    return _preview(task_subtree_live(task=task))


def agent_stop_preview(*, tenant: str, agent: str) -> StopPreview:
    """What the kill switch for `agent` would stop: its live tasks in `tenant` and their
    live descendants (of whatever agent), walked level by level off the (parent,
    spawn_seq) index for all of them at once: one query per level of the trees."""
    arguments.tenant(tenant)
    arguments.agent_name(agent)
    live = list(
        Task.objects.filter(tenant=tenant, agent=agent, status__in=sorted(states.LIVE)).order_by("id")[:SUBTREE_MAX]
    )
    seen = {t.id for t in live}
    level = list(seen)
    while level and len(live) < SUBTREE_MAX:
        children = [
            c
            for c in Task.objects.filter(parent_id__in=level).order_by("parent_id", "spawn_seq")[:SUBTREE_MAX]
            if c.id not in seen
        ]
        seen.update(c.id for c in children)
        live.extend(c for c in children if c.status in states.LIVE)  # a finished child may have live ones below
        level = [c.id for c in children]
    return _preview(live[:SUBTREE_MAX])


def _preview(live: list) -> StopPreview:
    stoppable = [t for t in live if t.status != states.STOPPING]
    stopping = [t for t in live if t.status == states.STOPPING]
    ids = [t.id for t in stoppable]
    since = timezone.now() - timedelta(seconds=config.gateway_timeout_seconds())
    effects = Effect.objects.filter(task_id__in=ids, state__in=EFFECTS_OPEN).order_by("id")
    calls = GatewayCall.objects.filter(task_id__in=ids, outcome="admitted", started_at__gt=since).order_by("id")
    return StopPreview(
        tasks=Capped(stoppable[:PREVIEW_SHOWN], max(0, len(stoppable) - PREVIEW_SHOWN)),
        already_stopping=Capped(stopping[:PREVIEW_SHOWN], max(0, len(stopping) - PREVIEW_SHOWN)),
        in_flight=_capped(effects) if ids else Capped([]),
        calls=_capped(calls) if ids else Capped([]),
    )


# --- The kill switch ----------------------------------------------------------------------


@dataclass(frozen=True)
class SwitchState:
    agent: str
    closed: bool
    changed_by: str
    changed_at: datetime | None
    reason: str
    stop_id: uuid.UUID | None


def agent_switch(*, tenant: str, agent: str) -> SwitchState:
    """Whether the agent's submission is closed in `tenant`, and who changed it last."""
    arguments.tenant(tenant)
    arguments.agent_name(agent)
    row = AgentSwitch.objects.filter(tenant=tenant, agent=agent).first()
    if row is None:
        return SwitchState(agent, False, "", None, "", None)
    return SwitchState(agent, row.closed, row.changed_by, row.changed_at, row.reason, row.stop_id)


def agent_switches(*, tenant: str) -> dict[str, SwitchState]:
    """Every agent with a closed switch in `tenant`, by name (for the agent list)."""
    arguments.tenant(tenant)
    return {
        row.agent: SwitchState(row.agent, True, row.changed_by, row.changed_at, row.reason, row.stop_id)
        for row in AgentSwitch.objects.filter(tenant=tenant, closed=True).order_by("agent")[:1000]
    }
