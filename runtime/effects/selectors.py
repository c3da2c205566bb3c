"""Reads of the effect ledger for the CLI, the API and the console."""

from __future__ import annotations

from runtime import arguments, states
from runtime.errors import EffectNotFound, InvalidInput
from runtime.models import Effect
from runtime.paging import Keyset, Page, keyset_page
from runtime.tasks.selectors import task_get

EFFECTS_BY_ID = Keyset("effects", ("id",), list, lambda raw: (int(raw[0]),))
EFFECTS_BY_STEP = Keyset("effects.task", ("step_seq",), list, lambda raw: (int(raw[0]),))


def effect_get(effect_id, *, tenant: str | None = None) -> Effect:
    """The ledger row, or EFFECT_NOT_FOUND; with `tenant`, only one of that tenant's tasks."""
    effects = Effect.objects.filter(id=arguments.effect_id(effect_id)).select_related("task", "attempt")
    effect = (effects.filter(task__tenant=tenant) if tenant is not None else effects).first()
    if effect is None:
        raise EffectNotFound(f"no effect #{effect_id}", effect=effect_id)
    return effect


def effect_page(
    *,
    tenant: str | None = None,
    task=None,
    state: str | None = None,
    effect_class: str | None = None,
    after: str | None = None,
    limit: int = 50,
) -> Page[Effect]:
    """The effect ledger newest first. With `task`, that task's effects by step (the
    effect_one_per_step index); else by tenant and state (effect_tenant_state_id), tenant
    (effect_tenant_id), state (effect_state_id) or all (the primary key). An unknown task,
    or one of another tenant, is TASK_NOT_FOUND; the class is residual."""
    for field, value, allowed in (
        ("state", state, states.EFFECT_STATES),
        ("effect_class", effect_class, states.EFFECT_CLASSES),
    ):
        if value is not None and value not in allowed:
            raise InvalidInput(f"{field} must be one of {', '.join(allowed)}", field=field)
    filters = {"tenant": tenant, "task": task, "state": state, "effect_class": effect_class}
    residual = {"effect_class": effect_class} if effect_class else {}
    if task is not None:
        driving, keyset = Effect.objects.filter(task_id=task_get(task, tenant=tenant).id), EFFECTS_BY_STEP
        if state:
            residual["state"] = state
    else:
        equal = {k: v for k, v in (("tenant", tenant), ("state", state)) if v is not None}
        driving, keyset = Effect.objects.filter(**equal), EFFECTS_BY_ID
    return keyset_page(driving, keyset=keyset, filters=filters, after=after, limit=limit, residual=residual)
