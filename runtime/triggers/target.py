"""What every trigger submits, checked the way task_submit checks it, when the trigger
is made (so a schedule with a bad input is refused now, not at 3 a.m.)."""

from __future__ import annotations

import uuid

from django.db import IntegrityError, transaction

from runtime import agents, arguments
from runtime.errors import InvalidArgument, InvalidTransition, StewardError
from runtime.tasks.services import validate_input

NAME_MAX = 100


def check(*, tenant, agent, input, owner, pool, actor) -> None:
    arguments.tenant(tenant)
    arguments.actor(owner, "owner")
    arguments.actor(actor)
    spec = agents.get(arguments.agent_name(agent))
    if pool is not None:
        arguments.pool_name(pool)
    if input is not None:  # a webhook's input arrives with each delivery
        validate_input(spec, input)


def name(value) -> str:
    return arguments.identifier("name", value, max_length=NAME_MAX)


def choice(field: str, value, allowed) -> str:
    if value not in allowed:
        raise InvalidArgument(
            f"{field} must be one of {', '.join(allowed)}, got {str(value)[:40]!r}", field=field, allowed=list(allowed)
        )
    return value


def get(model, missing: type[StewardError], what: str, value, tenant: str | None):
    """One trigger by id, in `tenant` if given: another tenant's is not found, the same
    answer as an id that names nothing."""
    try:
        found_id = uuid.UUID(str(value))
    except ValueError:
        raise missing(f"no {what} {str(value)[:40]!r}") from None
    qs = model.objects.filter(id=found_id)
    if tenant is not None:
        qs = qs.filter(tenant=tenant)
    found = qs.first()
    if found is None:
        raise missing(f"no {what} {found_id}")
    return found


def create_named(model, what: str, **fields):
    """Insert a schedule or a webhook, whose name is unique in its tenant. The unique
    constraint decides, not a read before the insert: of two creators racing one name,
    one gets the row and the other INVALID_TRANSITION, never an IntegrityError. The
    savepoint keeps the caller's transaction usable after losing."""
    try:
        with transaction.atomic():
            return model.objects.create(**fields)
    except IntegrityError as clash:
        if getattr(getattr(clash.__cause__, "diag", None), "constraint_name", "") != f"{what}_tenant_name":
            raise
        raise InvalidTransition(
            f"a {what} named {fields['name']!r} already exists in {fields['tenant']!r}", field="name"
        ) from None
