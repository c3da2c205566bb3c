"""Reads of agent memory for the agent (runtime/memory/agent.py), the CLI, the API and
the console. The scope is one agent's memory within one tenant: every read names both.

Validity is read on the database's clock (Now(): the harness's controllable clock in
tests), as every stored time is written: a record whose current version is past its
`valid_until`, or not yet at its `valid_from`, is not returned to an agent. An earlier
version never stands in for an expired current one: expiry ends the record until the
next write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet
from django.db.models.functions import Now

from runtime import states
from runtime.errors import InvalidInput, MemoryRecordNotFound
from runtime.memory.kinds import kind_name, record_key
from runtime.models import Effect, MemoryRecord
from runtime.paging import Keyset, Page, keyset_page

HISTORY_MAX = 200  # versions a record's detail shows, newest first
EFFECTS_MAX = 500  # effects a rollback lists
# What a rollback cannot undo: effects that happened, in part, or may have.
HAPPENED = (states.COMMITTED, states.PARTIAL, states.UNKNOWN)
MEMORY_BY_ID = Keyset("memory", ("id",), list, lambda raw: (int(raw[0]),))
VALIDITY = ("valid", "expired", "all")  # the list's `validity` filter


def _record(qs: QuerySet, *, tenant: str, agent: str, kind: str, key: str) -> QuerySet:
    return qs.filter(tenant=tenant, agent=agent, kind=kind_name(kind), key=record_key(key))


def latest(*, tenant: str, agent: str, kind: str, key: str) -> MemoryRecord | None:
    """The current version (the highest), valid or not; None if the record was never written."""
    return _record(MemoryRecord.objects, tenant=tenant, agent=agent, kind=kind, key=key).order_by("-version").first()


def version_get(*, tenant: str, agent: str, kind: str, key: str, version: int) -> MemoryRecord:
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= 2**31 - 1:
        raise InvalidInput("a memory version is a positive integer", field="version")
    row = _record(MemoryRecord.objects, tenant=tenant, agent=agent, kind=kind, key=key).filter(version=version).first()
    if row is None:
        raise MemoryRecordNotFound(f"no version {version} of {kind}/{key}", kind=kind, key=key, version=version)
    return row


def current_only(qs: QuerySet) -> QuerySet:
    """The rows of `qs` that are their record's current version (no higher version exists)."""
    newer = MemoryRecord.objects.filter(
        tenant=OuterRef("tenant"),
        agent=OuterRef("agent"),
        kind=OuterRef("kind"),
        key=OuterRef("key"),
        version__gt=OuterRef("version"),
    )
    return qs.filter(~Exists(newer))


def valid_now() -> Q:
    """A version within its validity window on the database's clock."""
    return Q(valid_from__lte=Now()) & (Q(valid_until__isnull=True) | Q(valid_until__gt=Now()))


def _with_validity(qs: QuerySet) -> QuerySet:
    return qs.annotate(valid_now=ExpressionWrapper(valid_now(), output_field=BooleanField()))


def readable(*, tenant: str, agent: str, kind: str, key: str) -> MemoryRecord | None:
    """What an agent reads: the current version if it is valid now, else None (one query)."""
    rows = _with_validity(_record(MemoryRecord.objects, tenant=tenant, agent=agent, kind=kind, key=key))
    current = rows.order_by("-version").first()
    return current if current is not None and current.valid_now else None


def effects_since(*, tenant: str, agent: str, since: datetime) -> list[Effect]:
    """The agent's effects in `tenant` whose intent was recorded at or after `since` and
    that happened or may have (committed, partial, unknown), oldest first."""
    rows = Effect.objects.filter(tenant=tenant, task__agent=agent, created_at__gte=since, state__in=HAPPENED)
    return list(rows.order_by("id")[:EFFECTS_MAX])


def memory_page(
    *,
    tenant: str,
    agent: str,
    kind: str | None = None,
    source: str | None = None,
    untrusted: bool | None = None,
    validity: str = "valid",
    after: str | None = None,
    limit: int = 50,
) -> Page[MemoryRecord]:
    """An agent's records in a tenant, each at its current version, most recently
    written first. `validity`: valid (the default: what the agent would read), expired
    (past valid_until, or not yet valid), or all. Filters are exact."""
    if kind is not None:
        kind_name(kind)
    if source is not None and source not in tuple(states.MemorySource):
        raise InvalidInput(f"source must be one of {', '.join(states.MemorySource)}", field="source")
    if validity not in VALIDITY:
        raise InvalidInput(f"validity must be one of {', '.join(VALIDITY)}", field="validity")
    rows = current_only(MemoryRecord.objects.filter(tenant=tenant, agent=agent))
    for field, value in (("kind", kind), ("source", source), ("untrusted", untrusted)):
        if value is not None:
            rows = rows.filter(**{field: value})
    if validity == "valid":
        rows = rows.filter(valid_now())
    elif validity == "expired":
        rows = rows.exclude(valid_now())
    filters = {
        "tenant": tenant,
        "agent": agent,
        "kind": kind,
        "source": source,
        "untrusted": untrusted,
        "validity": validity,
    }
    return keyset_page(rows, keyset=MEMORY_BY_ID, filters=filters, after=after, limit=limit)


@dataclass(frozen=True)
class RecordDetail:
    current: MemoryRecord
    valid: bool  # whether an agent reading it now gets it
    history: list[MemoryRecord]  # newest first, the current one included


def memory_record(*, tenant: str, agent: str, kind: str, key: str) -> RecordDetail:
    """One record with its history; MEMORY_RECORD_NOT_FOUND if this agent has none by
    that kind and key in this tenant (another tenant's is not found either)."""
    rows = _with_validity(_record(MemoryRecord.objects, tenant=tenant, agent=agent, kind=kind, key=key))
    history = list(rows.order_by("-version")[:HISTORY_MAX])
    if not history:
        raise MemoryRecordNotFound(f"no memory {kind}/{key} for agent {agent}", kind=kind, key=key)
    return RecordDetail(history[0], history[0].valid_now, history)
