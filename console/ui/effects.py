"""Effects to reconcile: the ledger filtered (by default: every `unknown` effect, the
ones waiting for a person), one effect with what is known of it, and resolving it as
committed (with a receipt) or failed, which moves its blocked task on."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import NO_ROWS, form_status, kept, listing, page, param, screen
from runtime import states
from runtime.effects.selectors import effect_get, effect_page
from runtime.effects.services import effect_resolve, receipt_parse
from runtime.errors import InvalidInput, StewardError
from runtime.tasks.selectors import steps_journaled

OUTCOMES = ("committed", "failed", "retry")


@screen
def effect_list(request, principal):
    typed = kept(request, ("state", "task", "effect_class"))
    form = {
        "page": NO_ROWS,
        "state": typed["state"] or states.UNKNOWN,
        "task": typed["task"],
        "effect_class": typed["effect_class"],
        "states": states.EFFECT_STATES,
        "classes": states.EFFECT_CLASSES,
        "next_url": None,
    }

    def read() -> dict:
        state = param(request, "state") or states.UNKNOWN
        state = None if state == "any" else state
        task, effect_class = param(request, "task"), param(request, "effect_class")
        rows = effect_page(
            tenant=principal.tenant,
            state=state,
            task=task,
            effect_class=effect_class,
            after=param(request, "cursor"),
            limit=50,
        )
        journaled = steps_journaled((e.task_id, e.step_seq) for e in rows.items)
        for e in rows.items:  # its step is a link only when the journal holds it
            e.step_journaled = (e.task_id, e.step_seq) in journaled
        given = {
            "state": state or "any",
            **({"task": task} if task else {}),
            **({"effect_class": effect_class} if effect_class else {}),
        }
        return {
            "page": rows,
            "state": state or "any",
            "task": task,
            "effect_class": effect_class,
            "next_url": "?" + urlencode({**given, "cursor": rows.next}) if rows.next else None,
        }

    return listing(request, principal, "console/effects.html", form, read, nav="effects")


@screen
def effect_detail(request, principal, effect_id):
    effect = effect_get(effect_id, tenant=principal.tenant)
    return page(request, principal, "console/effect.html", _form(effect), nav="effects")


@screen
def resolve(request, principal, effect_id):
    effect = effect_get(effect_id, tenant=principal.tenant)
    if request.method != "POST":
        return redirect("ui:effect", effect.id)
    require(principal, OPERATE_ACTION)
    outcome = param(request, "outcome", request.POST)
    receipt_text, note = param(request, "receipt", request.POST), param(request, "note", request.POST) or ""
    try:
        if outcome not in OUTCOMES:
            raise InvalidInput(
                "choose what happened: committed (it was done), failed (it was not) or retry "
                "(it was not: send it again)",
                field="outcome",
            )
        receipt = None
        if outcome == "committed" and receipt_text:
            receipt = receipt_parse(receipt_text)
        with acting(principal):
            effect_resolve(effect_id=effect.id, outcome=outcome, actor=principal.actor, receipt=receipt, note=note)
        messages.success(
            request,
            "It will be sent again under the same key; its task goes on from there."
            if outcome == "retry"
            else f"Recorded as {outcome}; its task goes on from there.",
        )
        return redirect("ui:effect", effect.id)
    except StewardError as exc:
        context = _form(effect, outcome=outcome, receipt=receipt_text or "", note=note, error=exc)
        return page(request, principal, "console/effect.html", context, status=form_status(exc), nav="effects")


def _form(effect, *, outcome: str | None = None, receipt: str = "", note: str = "", error=None) -> dict:
    return {
        "effect": effect,
        "task": effect.task,
        "step_journaled": bool(steps_journaled([(effect.task_id, effect.step_seq)])),
        "outcome": outcome,
        "receipt": receipt,
        "note": note,
        "error": error,
        "resolvable": effect.state == states.UNKNOWN,
    }
