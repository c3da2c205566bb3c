"""Reads of tasks for the CLI, the API and the console: one task, its detail, pages of
tasks. Nothing here writes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.utils import timezone

from runtime import agents, arguments, config, db, states
from runtime.audit import chain_of
from runtime.errors import AmbiguousTaskId, InvalidInput, StepNotFound, TaskNotFound, UnknownAgent
from runtime.ids import epoch_ms, uuid7_floor
from runtime.limits.services import default_pool_name
from runtime.models import Attempt, AuditEvent, Effect, Process, Step, Task
from runtime.paging import Keyset, Page, keyset_page


@dataclass
class TaskDetail:
    task: Task
    attempts: list[Attempt]
    steps: list[Step]
    effects: list[Effect]
    children: list[Task]
    audit: list[AuditEvent]
    # The agent version it waits for, when no live worker serves it (task_waits_for_version).
    waiting_for_version: str | None = None


def task_get(task_id, *, tenant: str | None = None) -> Task:
    """The task, or TASK_NOT_FOUND. With `tenant`, a task of another tenant is not found
    either: the web side never tells a stranger that an id exists."""
    try:
        tasks = Task.objects.filter(id=task_id)
        task = (tasks.filter(tenant=tenant) if tenant is not None else tasks).first()
    except Exception:
        task = None
    if task is None:
        raise TaskNotFound(f"no task {task_id}", task=str(task_id))
    return task


def task_for_key(*, tenant: str, key: str) -> Task:
    """The task a caller's idempotency key made in `tenant` (task_one_per_caller_key).
    Submitting again with the key returns it as well, but creates it when it is missing;
    this only reads."""
    arguments.tenant(tenant)
    arguments.idempotency_key(key)
    task = Task.objects.filter(tenant=tenant, idempotency_key=key).first()
    if task is None:
        raise TaskNotFound(f"no task has key {key!r} in tenant {tenant!r}", tenant=tenant, key=key)
    return task


AMBIGUOUS_SHOWN = 5  # matches an ambiguous prefix lists, so the operator can pick one


def task_id_from_prefix(value) -> uuid.UUID:
    """The id of the one task whose id is `value` or starts with it (arguments.task_id_prefix
    says what may be typed), for the CLI, where nobody types 36 characters.

    A prefix stands for a range of the primary key, from the prefix padded with 0s to the
    prefix padded with fs: one index range read of at most AMBIGUOUS_SHOWN + 1 rows,
    however many tasks there are (never `id::text LIKE`, which reads them all). Ids are
    time-ordered (runtime/ids.py), so tasks created close together share a long prefix;
    an ambiguous prefix is refused (AMBIGUOUS_TASK_ID) naming the ids it matches.
    """
    digits = arguments.task_id_prefix(value)
    low, high = uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))
    found = list(
        Task.objects.filter(id__gte=low, id__lte=high)
        .order_by("id")
        .values_list("id", "agent", "status")[: AMBIGUOUS_SHOWN + 1]
    )
    if not found:
        raise TaskNotFound(
            f"no task {value}" if len(digits) == 32 else f"no task id starts with {value}", task=str(value)
        )
    if len(found) > 1:
        more = "more than " if len(found) > AMBIGUOUS_SHOWN else ""
        shown = ", ".join(f"{task_id} ({agent}, {status})" for task_id, agent, status in found[:AMBIGUOUS_SHOWN])
        raise AmbiguousTaskId(
            f"{value} begins {more}{min(len(found), AMBIGUOUS_SHOWN)} task ids: {shown}"
            f"{', ...' if more else ''}; give more of the id",
            prefix=str(value),
            matches=[str(row[0]) for row in found[:AMBIGUOUS_SHOWN]],
        )
    return found[0][0]


def task_detail(task_id, *, step_limit: int = 200, audit_limit: int = 200, child_limit: int = 200) -> TaskDetail:
    """A task with the latest of its journal, its audit chain and its first children,
    each read in its own index's order (a long-lived task's history is only paged)."""
    task = task_get(task_id)
    return TaskDetail(
        task=task,
        attempts=list(task.attempts.order_by("epoch")),
        steps=list(task.steps.order_by("-seq")[:step_limit])[::-1],
        effects=list(task.effects.order_by("step_seq")),
        children=list(task.children.order_by("spawn_seq")[:child_limit]),
        audit=list(
            AuditEvent.objects.filter(chain=chain_of(task_id=task.id, tenant=task.tenant)).order_by("-chain_seq")[
                :audit_limit
            ]
        )[::-1],
        waiting_for_version=task_waits_for_version(task),
    )


def current_version(agent: str) -> str | None:
    """The version new tasks of `agent` get here; None if it is not registered here."""
    try:
        return agents.get(agent).version
    except UnknownAgent:
        return None


def live_workers():
    """Worker processes seen within a lease: those whose claims run tasks now."""
    alive = timezone.now() - timedelta(seconds=config.lease_seconds())
    return Process.objects.filter(kind="worker", stopped_at__isnull=True, seen_at__gte=alive)


# What a task that has not started waits for, when no live worker serves its agent at all:
# any version (a space is never in a version, runtime/agents.py _valid_version).
ANY_VERSION = "any version"


def task_waits_for_version(task: Task) -> str | None:
    """The agent version a queued task waits for, when no live worker serves it: it is
    not failed, only passed over by every claim until such a worker beats again
    (docs/adr/0037-agent-versions.md). ANY_VERSION for a task that has not started (its
    first claim fixes its version) when no live worker serves its agent at all. None when
    it is not queued, predates versions, or some live worker serves it."""
    if task.status != states.QUEUED or task.agent_version == "":
        return None
    if task.agent_version is None:
        return None if live_workers().filter(versions__has_key=task.agent).exists() else ANY_VERSION
    served = live_workers().filter(versions__contains={task.agent: [task.agent_version]}).exists()
    return None if served else task.agent_version


def task_live_version(task_id, *, tenant: str) -> str:
    """A digest of what the console's live task view shows, read in one prepared
    statement (runtime/sql/task_live_version.sql says what it covers). A live poll
    compares it with the one the browser shows and builds the view only when they
    differ (console/ui/task.py), so an unchanged poll reads nothing else. TASK_NOT_FOUND
    as task_get, for another tenant's task too."""
    try:
        key = task_id if isinstance(task_id, uuid.UUID) else uuid.UUID(str(task_id))
    except ValueError:
        raise TaskNotFound(f"no task {task_id}", task=str(task_id)) from None
    found = db.fetchone("task_live_version", {"task": key, "tenant": tenant}, row=_Version)
    if found is None:
        raise TaskNotFound(f"no task {task_id}", task=str(task_id))
    return found.version


@db.reads("task_live_version")
@dataclass(frozen=True, slots=True)
class _Version:
    version: str


# --- pages (runtime/paging.py): newest first, from an index, with an opaque cursor ------------

TASKS_BY_ID = Keyset("tasks", ("id",), lambda key: [str(key[0])], lambda raw: (uuid.UUID(raw[0]),))
TASKS_BY_SPAWN = Keyset("tasks.children", ("spawn_seq",), list, lambda raw: (int(raw[0]),))


def task_page(
    *,
    tenant: str | None = None,
    status: str | None = None,
    agent: str | None = None,
    pool: str | None = None,
    parent=None,
    root=None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    after: str | None = None,
    limit: int = 50,
) -> Page[Task]:
    """Tasks newest first (by id: ids are time-ordered, runtime/ids.py).

    The driving index, by the filters given: `parent` walks the parent's children by
    spawn order (task_one_child_per_spawn_step); `root` walks the tree below the root
    (task_tree; the root itself is not in the page); else tenant and status
    (task_tenant_status_id), tenant (task_tenant_id), status (task_status_id) or the
    primary key. A created range narrows the id range of whichever index drives (ids
    carry their creation millisecond), so it is never residual there. Every other
    filter is residual (runtime/paging.py).

    A `parent` or `root` that names no task of `tenant` (another tenant's, or none) is
    TASK_NOT_FOUND, as a task's own page is: never an empty page, which would tell a
    stranger nothing different from a task with no children, but would tell a client
    with a typo that all is well.
    """
    filters = {
        "tenant": tenant,
        "status": status,
        "agent": agent,
        "pool": pool,
        "parent": parent,
        "root": root,
        "created_after": created_after,
        "created_before": created_before,
    }
    if status is not None and status not in states.TASK_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(states.TASK_STATUSES)}", field="status")
    equal = {
        "tenant": tenant,
        "status": status,
        "agent": agent,
        "pool_id": pool,
        "parent_id": _named_task(parent, "parent", tenant),
        "root_id": _named_task(root, "root", tenant),
    }
    equal = {k: v for k, v in equal.items() if v is not None}
    created = {
        k: v for k, v in (("created_at__gte", created_after), ("created_at__lt", created_before)) if v is not None
    }

    driving_on: tuple[str, ...]
    if "parent_id" in equal:
        driving_on, keyset = ("parent_id",), TASKS_BY_SPAWN
    elif "root_id" in equal:
        driving_on, keyset = ("root_id",), TASKS_BY_ID
    else:
        driving_on, keyset = tuple(k for k in ("tenant", "status") if k in equal), TASKS_BY_ID
    driving = Task.objects.filter(**{k: equal.pop(k) for k in driving_on})
    if "root_id" in driving_on:
        driving = driving.filter(parent__isnull=False)  # the partial index's predicate
    if keyset is TASKS_BY_ID:
        driving = driving.filter(_id_range(created_after, created_before), **created)
        created = {}
    return keyset_page(driving, keyset=keyset, filters=filters, after=after, limit=limit, residual={**equal, **created})


def _named_task(value, field: str, tenant: str | None) -> uuid.UUID | None:
    """The id of the task a filter names: malformed, INVALID_INPUT; naming no task of the
    tenant, TASK_NOT_FOUND (one primary-key read)."""
    task_id = arguments.task_filter(value, field)
    return None if task_id is None else task_get(task_id, tenant=tenant).id


def _id_range(created_after: datetime | None, created_before: datetime | None) -> Q:
    """created_at >= a and created_at < b, as bounds on the time-ordered id. A task's id
    carries the millisecond of its created_at, rounded down (migration 0005)."""
    bounds = Q()
    if created_after is not None:
        bounds &= Q(id__gte=uuid7_floor(epoch_ms(created_after)))
    if created_before is not None:
        bounds &= Q(id__lt=uuid7_floor(epoch_ms(created_before) + 1))
    return bounds


# --- counts and agents, for the dashboard and the agents page ---------------------------------

RECENT = timedelta(hours=24)


def task_counts(*, tenant: str) -> dict[str, int]:
    """How many of a tenant's tasks are in each status: every live task, and the tasks
    that finished among those created in the last 24 hours. Live statuses are few rows
    each (task_tenant_status_id); finished ones grow without end, so they are counted
    over a day's id range (ids carry their creation time) and the cost stays flat."""
    counts = dict.fromkeys(states.TASK_STATUSES, 0)
    live = Task.objects.filter(tenant=tenant, status__in=states.LIVE).values("status").annotate(n=Count("id"))
    recent = Task.objects.filter(
        tenant=tenant, status__in=states.TERMINAL, id__gte=uuid7_floor(epoch_ms(timezone.now() - RECENT))
    )
    for row in [*live, *recent.values("status").annotate(n=Count("id"))]:
        counts[row["status"]] = row["n"]
    return counts


@dataclass(frozen=True)
class AgentInfo:
    name: str
    pool: str
    description: str
    input_schema: dict | None  # JSON Schema of the agent's input model, if it declares one


def agent_list() -> list[AgentInfo]:
    """The agents registered in this process (the web process registers the same
    modules as the workers: STEWARD_AGENT_MODULES), by name."""
    return [_info(spec) for spec in agents.registered()]


def agent_get(name: str) -> AgentInfo:
    return _info(agents.get(name))


def _info(spec) -> AgentInfo:
    schema = spec.input_model.model_json_schema() if spec.input_model is not None else None
    return AgentInfo(spec.name, spec.pool or default_pool_name(), spec.description, schema)


# --- a task's journal and attempts, paged (the API's and the console's task detail) ----------

STEPS_BY_SEQ = Keyset("tasks.steps", ("seq",), list, lambda raw: (int(raw[0]),))
ATTEMPTS_BY_EPOCH = Keyset("tasks.attempts", ("epoch",), list, lambda raw: (int(raw[0]),))


def step_page(*, task, tenant: str | None = None, after: str | None = None, limit: int = 50) -> Page[Step]:
    """A task's journal, newest step first, off the step table's (task_id, seq) primary
    key: a journal of thousands of steps is read a page at a time, never whole. With
    `tenant`, another tenant's task is TASK_NOT_FOUND."""
    found = task_get(task, tenant=tenant)
    return keyset_page(
        Step.objects.filter(task_id=found.id), keyset=STEPS_BY_SEQ, filters={"task": found.id}, after=after, limit=limit
    )


def live_attempt(task) -> Attempt | None:
    """The attempt holding the task's lease now, or None: at most one attempt of a task
    is unended (attempt_one_live_per_task, whose partial index this reads). The lease
    holder on the console's task page and in the API's task detail."""
    return Attempt.objects.filter(task_id=getattr(task, "id", task), ended_at__isnull=True).first()


def attempt_page(*, task, tenant: str | None = None, after: str | None = None, limit: int = 50) -> Page[Attempt]:
    """A task's attempts, newest epoch first, off attempt_one_per_epoch (task, epoch): a
    task that slept or waited a thousand times has a thousand attempts."""
    found = task_get(task, tenant=tenant)
    return keyset_page(
        Attempt.objects.filter(task_id=found.id),
        keyset=ATTEMPTS_BY_EPOCH,
        filters={"task": found.id},
        after=after,
        limit=limit,
    )


# --- the journal in call order, and the statuses of rows a list shows (the console) ------------

STEPS_SHOWN_MAX = 500


def journal_page(*, task, after: int | None = None, limit: int = 100) -> Page[Step]:
    """A task's journal in call order (oldest first, as the console's timeline reads it;
    the API's step_page is newest first, like every API list), `limit` steps after seq `after`,
    read off the journal's primary key (task, seq): a 5,000-step journal costs the page.
    `next` is the last seq shown (as text), or None when the journal ends there."""
    task_id = getattr(task, "id", task)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= STEPS_SHOWN_MAX:
        raise InvalidInput(f"limit must be an integer from 1 to {STEPS_SHOWN_MAX}", field="limit")
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or not 0 <= after < 2**31):
        raise InvalidInput("after must be a step seq", field="after")
    steps = Step.objects.filter(task_id=task_id)
    if after is not None:
        steps = steps.filter(seq__gt=after)
    rows = list(steps.order_by("seq")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, str(rows[-1].seq) if more else None)


def step_get(*, task, seq) -> Step:
    """Call number `seq` of a task's journal, or STEP_NOT_FOUND."""
    task_id = getattr(task, "id", task)
    step = None
    if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq < 2**31:
        step = Step.objects.filter(task_id=task_id, seq=seq).first()
    if step is None:
        raise StepNotFound(f"task {task_id} has no step #{seq}", task=str(task_id), seq=seq)
    return step


def steps_journaled(pairs) -> frozenset[tuple[uuid.UUID, int]]:
    """Which of these (task id, seq) steps the journal holds, as (task id, seq): one read
    of the step key's index. An effect or an approval names the step it belongs to even
    when that step was never journaled (the attempt died between the ledger row and the
    step row): a page links a step only when it is here, so a link never opens
    STEP_NOT_FOUND."""
    wanted = {
        (uuid.UUID(str(task)), seq)
        for task, seq in pairs
        if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq < 2**31
    }
    if not wanted:
        return frozenset()
    rows = Step.objects.filter(
        task_id__in={task for task, _ in wanted}, seq__in={seq for _, seq in wanted}
    ).values_list("task_id", "seq")
    return frozenset(row for row in rows if row in wanted)


def step_count(*, task) -> int:
    """How many calls a task's journal holds: one index-only count of its (task, seq) keys."""
    return Step.objects.filter(task_id=getattr(task, "id", task)).count()


NEW_COUNTED_MAX = 100


@dataclass(frozen=True)
class TaskChanges:
    tasks: dict[str, Task]  # task id (text) -> the task now, for the ids asked about (this tenant's)
    newer: int  # tasks matching the filters made after `newer_than`, up to NEW_COUNTED_MAX


def task_changes(
    *, tenant: str, ids, newer_than=None, status: str | None = None, agent: str | None = None, parent=None, root=None
) -> TaskChanges:
    """What a list on screen needs to stay current without moving: each row it shows
    as it is now (primary-key lookups, at most a page), and how many matching tasks
    arrived after its snapshot (ids are time-ordered, so "after" is an id range on the
    index the list pages from; counted up to NEW_COUNTED_MAX)."""
    wanted = []
    for value in list(ids)[:STEPS_SHOWN_MAX]:
        try:
            wanted.append(arguments.task_id(value))
        except Exception:
            continue
    tasks = {str(task.id): task for task in Task.objects.filter(tenant=tenant, id__in=wanted)}
    newer = 0
    if newer_than is not None:
        newest = arguments.task_filter(newer_than, "newer_than")
        matching = Task.objects.filter(tenant=tenant, id__gt=newest)
        for field, value in (
            ("status", status),
            ("agent", agent),
            ("parent_id", arguments.task_filter(parent, "parent")),
            ("root_id", arguments.task_filter(root, "root")),
        ):
            if value is not None:
                matching = matching.filter(**{field: value})
        newer = len(matching.values_list("id", flat=True)[:NEW_COUNTED_MAX])
    return TaskChanges(tasks, newer)


SUBTREE_MAX = 10_000


def task_subtree_live(*, task) -> list[Task]:
    """The live tasks task_cancel would cancel: the task itself (if live) and every live
    descendant, level by level off the (parent, spawn_seq) index, parents first. What a
    confirmation shows is what the cancel then touches (short of a race with a finish)."""
    task_id = getattr(task, "id", task)
    found: list[Task] = []
    level = [task_id]
    live = list(Task.objects.filter(id=task_id, status__in=states.LIVE))
    while level and len(found) < SUBTREE_MAX:
        children = list(Task.objects.filter(parent_id__in=level).order_by("parent_id", "spawn_seq")[:SUBTREE_MAX])
        found.extend(child for child in children if child.status in states.LIVE)
        level = [child.id for child in children]
    return live + found[:SUBTREE_MAX]
