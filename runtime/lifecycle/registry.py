"""Every place Steward writes a payload, in one place (docs/adr/0038-erasure-lifecycle.md).

A payload is what an agent, a model, a tool or a submitter handed Steward: a task's input
and output, a step's result or error, an effect's receipt, a gateway call's body, the
action an approval quotes. Retention and erasure (runtime/lifecycle/services.py) walk
PLACES and nothing else: a table that starts holding a payload is one more entry here,
and tests/runtime/lifecycle/test_erasure.py searches every text, jsonb and bytea column
of the schema, so a place missing from this list fails it. Agent memory (the memory package) is one
of them: the "memory" place, the last below.

What each entry says:
* `payload`: the columns erased, each with the value its tombstone holds (SQL NULL where
  the column allows it, JSON null where it does not);
* `kept_hash`: the column that already held the payload's hash and stays (None: only
  `erased_hash`, which the tombstone writes: sha256 of the erased columns as they were);
* `task`: the column naming the task the row belongs to: a tree and an owner select rows
  through their task, which says the tenant, the owner and whether it has finished;
  so does a tenant, unless the place names its `tenant` column;
* `tenant`, `agent` (memory only): the columns a tenant and an agent subject select by
  directly, (tenant) and (tenant, agent): memory is kept per agent within a tenant, and a
  person's write names no task;
* `retention`: the RetentionPolicy field whose period applies, measured from the task's
  `finished_at` (only finished tasks' payloads are ever erased), or, for a place that
  names its `written` column, from the row's own time of writing.

Memory (steward_memory_record, docs/adr/0039-agent-memory.md): every version's `payload`,
its `payload_hash` kept. An agent subject erases all of that agent's versions in the
tenant; a tenant subject, all of the tenant's; a task (tree) or an owner subject, the
versions those tasks wrote (provenance `task_id`: what the agent remembered from them).
Retention erases every version written more than `memory_days` ago, the current one
too: the period bounds how long anything remembered is kept, and a record not rewritten
within it is forgotten (a read of it finds no record). The journal's memory steps are
the journal place's, erased with their task (an agent subject does not select them).

Identifiers here are constants, never input: runtime/lifecycle/statements.py builds the
tombstone statement from them.

Places that hold no payload, by design, and what holds them to it:
* the audit trail (steward_audit): ids, digests, hashes, identifiers; never an input,
  output or receipt (its rows are hash-chained and sealed, so a payload copied into one
  could never be erased without breaking the chain). A denial copies the decision's
  `action` and `resource`: identifiers of what authority was asked for, kept for the
  trail's own period (RetentionPolicy.audit_days, the longest), then archived and dropped;
* decisions (steward_decision): the same identifiers, append-only; dropped whole with
  their time partitions once past `decision_days` (the partitioning work, not here);
* a webhook delivery keeps its body's digest, never the body; a schedule's and a
  dependency trigger's `input` is configuration an operator wrote, erased by removing it;
* exports: the audit export streams to its caller and is not kept; the audit archive
  holds audit rows only (see above). EXPORTS below is empty, and an erasure's receipt
  says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# The tombstone of a NOT NULL jsonb column.
JSON_NULL = "'null'::jsonb"


class SubjectKind(StrEnum):
    """What an erasure by subject ("forget this") names."""

    TASK = "task"  # a task and every task below it (its tree from there down)
    OWNER = "owner"  # every task run on one person's authority, in one tenant
    AGENT = "agent"  # an agent's memory in one tenant (the memory place)
    TENANT = "tenant"  # everything of one tenant


@dataclass(frozen=True, eq=False)  # hashed by identity: the statements are cached per place
class Place:
    name: str  # stable: receipts, previews and the audit name places by it
    table: str
    key: tuple[str, ...]  # the primary key, in the order receipts list rows
    payload: dict[str, str]  # column -> its tombstone (an SQL expression)
    kept_hash: str | None
    task: str  # the column that names the row's task
    retention: str  # RetentionPolicy field
    subjects: frozenset[SubjectKind]
    what: str  # one line for people: the preview and the console say it
    tenant: str | None = None  # a tenant subject selects by this column, not through tasks
    agent: str | None = None  # an agent subject selects by (tenant, this column)
    written: str | None = None  # retention counts from this column, not the task's finished_at


TASKS = frozenset({SubjectKind.TASK, SubjectKind.OWNER, SubjectKind.TENANT})

PLACES: tuple[Place, ...] = (
    Place(
        name="task",
        table="steward_task",
        key=("id",),
        payload={"input": JSON_NULL, "output": "NULL", "error": "NULL"},
        kept_hash="input_digest",
        task="id",
        retention="task_days",
        subjects=TASKS,
        what="tasks' inputs, outputs and errors",
    ),
    Place(
        name="journal",
        table="steward_step",
        key=("task_id", "seq"),
        payload={"output": "NULL", "error": "NULL"},
        kept_hash=None,
        task="task_id",
        retention="task_days",
        subjects=TASKS,
        what="journal steps' results and errors",
    ),
    Place(
        name="effect",
        table="steward_effect",
        key=("id",),
        payload={"receipt": "NULL", "error": "NULL"},
        kept_hash="request_digest",
        task="task_id",
        retention="task_days",
        subjects=TASKS,
        what="effects' receipts and errors",
    ),
    Place(
        name="gateway_call",
        table="steward_gateway_call",
        key=("id",),
        payload={"receipt": "NULL", "response": "NULL"},
        kept_hash=None,
        task="task_id",
        retention="gateway_days",
        subjects=TASKS,
        what="gateway calls' receipts and response bodies",
    ),
    Place(
        name="approval",
        table="steward_approval",
        key=("id",),
        payload={"action": JSON_NULL, "context": JSON_NULL},
        kept_hash="action_hash",
        task="task_id",
        retention="task_days",
        subjects=TASKS,
        what="approval packages' quoted actions and contexts",
    ),
    Place(
        name="memory",
        table="steward_memory_record",
        key=("id",),
        payload={"payload": "NULL"},
        kept_hash="payload_hash",
        task="task_id",
        retention="memory_days",
        subjects=frozenset(SubjectKind),
        what="agent memory versions' contents",
        tenant="tenant",
        agent="agent",
        written="created_at",
    ),
)


@dataclass(frozen=True)
class RedisPlace:
    """Keys Steward writes in Redis, by pattern ({tenant} filled in)."""

    name: str
    pattern: str
    subjects: frozenset[SubjectKind]
    what: str


# What Steward keeps in Redis (grep `redis` in runtime/ and console/):
# * quota windows (runtime/limits/quotas.py): steward:quota:<tenant>:<service>[:<start>],
#   counts, deleted with their tenant;
# * Celery's queues and kombu's bindings: wake-up messages that carry a pool's name and
#   nothing else (runtime/attempts/dispatch.py; results are ignored, no result backend);
# * no stop channel, cache or session: stops reach workers through PostgreSQL's NOTIFY.
REDIS_PLACES: tuple[RedisPlace, ...] = (
    RedisPlace(
        name="quota",
        pattern="steward:quota:{tenant}:*",
        subjects=frozenset({SubjectKind.TENANT}),
        what="quota windows' counts",
    ),
)

# Files Steward writes that could hold a payload: none (see the module's docstring).
EXPORTS: tuple[str, ...] = ()


def places_for(kind: SubjectKind) -> list[Place]:
    return [p for p in PLACES if kind in p.subjects]


def place(name: str) -> Place:
    for p in PLACES:
        if p.name == name:
            return p
    raise KeyError(name)
