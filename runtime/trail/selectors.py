"""Reads of the audit trail for the CLI, the API and the console: a tenant's events,
newest first, or one task's chain."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import models

from runtime import arguments, db
from runtime.audit import chain_of
from runtime.errors import AuditEventNotFound, InvalidInput
from runtime.models import Approval, AuditEvent, AuditSeal, Decision, Effect, Grant, Schedule, Stop, Task, Webhook
from runtime.paging import Keyset, Page, keyset_page
from runtime.tasks.selectors import task_get
from runtime.trail.seals import seal_export

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


AUDIT_BY_TIME = Keyset(
    "audit", ("at", "id"), lambda key: [_micros(key[0]), key[1]], lambda raw: (_from_micros(int(raw[0])), int(raw[1]))
)
AUDIT_BY_CHAIN = Keyset("audit.task", ("chain_seq",), list, lambda raw: (int(raw[0]),))


def audit_page(
    *,
    tenant: str,
    task=None,
    actor: str | None = None,
    kind: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after: str | None = None,
    limit: int = 50,
) -> Page[AuditEvent]:
    """A tenant's audit trail newest first: by time (audit_tenant_at: tenant, at, id),
    with `since` (inclusive) and `until` (exclusive) as bounds on the same index; or, with
    `task`, that task's chain by sequence (audit_chain_seq). Actor and kind are residual.
    A `task` that names no task of the tenant is TASK_NOT_FOUND, as in effect_page.
    """
    if not isinstance(tenant, str) or not tenant:
        raise InvalidInput("tenant is required", field="tenant")
    filters = {"tenant": tenant, "task": task, "actor": actor, "kind": kind, "since": since, "until": until}
    residual = {k: v for k, v in (("actor", actor), ("kind", kind)) if v}
    timed = {k: v for k, v in (("at__gte", since), ("at__lt", until)) if v is not None}
    if task is not None:
        chain = chain_of(task_id=task_get(arguments.task_filter(task, "task"), tenant=tenant).id, tenant=tenant)
        driving = AuditEvent.objects.filter(chain=chain, tenant=tenant)
        return keyset_page(
            driving, keyset=AUDIT_BY_CHAIN, filters=filters, after=after, limit=limit, residual={**residual, **timed}
        )
    driving = AuditEvent.objects.filter(tenant=tenant, **timed)
    return keyset_page(
        driving,
        keyset=AUDIT_BY_TIME,
        filters=filters,
        after=after,
        limit=limit,
        residual=residual,
        past=_before_in_time,
    )


def tenant_chain_events(*, tenant: str, kinds: list[str]) -> list[AuditEvent]:
    """The tenant's own chain (events about no task: members, tokens, grants, switches),
    oldest first, of these kinds: read off audit_chain_seq, so it costs the tenant-level
    events, never the tasks' (the demo's seed asks it what people did before it)."""
    chain = chain_of(tenant=arguments.tenant(tenant))
    return list(AuditEvent.objects.filter(chain=chain, kind__in=kinds).order_by("chain_seq"))


def _before_in_time(qs, key):
    # A row comparison, so the index serves it as one range: (at, id) < (cursor's at, id).
    return qs.extra(where=['("steward_audit"."at", "steward_audit"."id") < (%s, %s)'], params=list(key))


def _micros(when: datetime) -> int:
    return (when - _EPOCH) // timedelta(microseconds=1)


def _from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


@db.reads("audit_tenants")
@dataclass(frozen=True, slots=True)
class _Tenant:
    tenant: str


def audit_tenants() -> list[str]:
    """Every tenant with audit events (audit_tenants.sql: an index probe a tenant)."""
    return [row.tenant for row in db.fetchall("audit_tenants", {}, row=_Tenant)]


def audit_seals(*, tenant: str | None = None):
    """Every seal (one tenant's, or all), oldest first, as JSON for safekeeping outside
    the database: a seal later deleted from the table is then still known."""
    seals = AuditSeal.objects.order_by("tenant", "seq")
    if tenant is not None:
        seals = seals.filter(tenant=arguments.tenant(tenant))
    for seal in seals.iterator(chunk_size=500):
        yield seal_export(seal)


def audit_get(event_id, *, tenant: str) -> AuditEvent:
    """One of a tenant's audit events, or AUDIT_EVENT_NOT_FOUND (another tenant's too)."""
    event = AuditEvent.objects.filter(
        id=arguments.bounded("event", event_id, minimum=1, maximum=2**63 - 1), tenant=tenant
    ).first()
    if event is None:
        raise AuditEventNotFound(f"no audit event #{event_id}", event=event_id)
    return event


def audit_iter(
    *,
    tenant: str,
    task=None,
    actor: str | None = None,
    kind: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    batch: int = 500,
):
    """Every event audit_page would show for these filters, page after page, in the same
    order: what an export of "the current filter" streams. Nothing is held between pages."""
    after = None
    while True:
        page = audit_page(
            tenant=tenant, task=task, actor=actor, kind=kind, since=since, until=until, after=after, limit=batch
        )
        yield from page.items
        if page.next is None:
            return
        after = page.next


def audit_export_line(event: AuditEvent) -> str:
    """One exported event: a JSON object on a line, with its place in its hash chain
    (chain, chain_seq, prev_hash, hash) and its time to the microsecond (part of its
    hash), so that a copy kept outside the database can be verified row by row. The
    API's and the console's exports write exactly this."""
    return (
        json.dumps(
            {
                "id": event.id,
                "at": event.at.isoformat(),
                "tenant": event.tenant,
                "actor": event.actor,
                "kind": event.kind,
                "task": str(event.task_id) if event.task_id else None,
                "data": event.data,
                "chain": event.chain,
                "chain_seq": event.chain_seq,
                "prev_hash": bytes(event.prev_hash).hex(),
                "hash": bytes(event.hash).hex(),
            },
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        + "\n"
    )


# What an event's data names, by key: the kind of object and the model it is a row of.
SUBJECT_KEYS: dict[str, tuple[str, type[models.Model]]] = {
    "grant": ("grant", Grant),
    "effect": ("effect", Effect),
    "approval_id": ("approval", Approval),
    "decision_id": ("decision", Decision),
    "stop": ("stop", Stop),
    "schedule": ("schedule", Schedule),
    "webhook": ("webhook", Webhook),
    "new_task": ("task", Task),
    "old_task": ("task", Task),
    "previous": ("task", Task),
}


@dataclass(frozen=True)
class Subject:
    key: str  # the data key that named it
    kind: str  # grant, effect, approval, decision, stop, schedule, webhook, task
    id: str


def audit_subjects(event: AuditEvent) -> list[Subject]:
    """The objects an event's data names (a grant, an effect, an approval, a decision, a
    stop, a schedule, a webhook, another task) that its tenant still holds: what its page
    links to. One primary-key read each; a value that names no such row is left out, so
    no link opens a 404."""
    data = event.data if isinstance(event.data, dict) else {}
    found = []
    for key, (kind, model) in SUBJECT_KEYS.items():
        value = data.get(key)
        if value is None or isinstance(value, (bool, dict, list)):
            continue
        try:
            pk = model._meta.pk.to_python(value)
        except (ValueError, TypeError, ValidationError):  # not an id of that kind: it names nothing
            continue
        if pk is None or (isinstance(pk, int) and not 0 < pk < 2**63):
            continue
        if model.objects.filter(pk=pk, tenant=event.tenant).exists():
            found.append(Subject(key=key, kind=kind, id=str(pk)))
    return found
