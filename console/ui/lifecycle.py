"""Retention and erasure: a tenant's retention periods, with what a change would erase
shown before it is saved; erasure requests, previewed then confirmed; and the signed
receipts, each at its own URL. The same services as the API and the CLI (runtime.lifecycle)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect

from console.access import OPERATE_ACTION, acting, require
from console.ui.web import form_status, page, screen
from runtime.errors import ArgumentOutOfRange, ErasureReceiptNotFound, StewardError
from runtime.lifecycle.selectors import (
    PERIODS,
    PLACES,
    erasure_preview,
    receipt_check,
    receipt_get,
    receipt_page,
    retention_affects,
    retention_get,
)
from runtime.lifecycle.services import Subject, erasure_run, retention_set


def _days(field: str, text: str) -> int | None:
    """An empty box is "kept"; anything else a whole number of days (bounds: the service's)."""
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 6:
        raise ArgumentOutOfRange(f"{field} must be a whole number of days, or empty to keep, got {text[:20]!r}")
    return int(text)


@screen
def retention_page(request, principal):
    current = retention_get(tenant=principal.tenant)
    context = {"current": current, "periods": PERIODS, "typed": None, "affects": None, "error": None}
    return page(request, principal, "console/retention.html", context, nav="retention")


@screen
def retention_set_view(request, principal):
    """`preview`: what the periods typed would erase at the next run, nothing saved; else save."""
    if request.method != "POST":
        return redirect("ui:retention")
    require(principal, OPERATE_ACTION)
    typed = {k: (request.POST.get(k) or "").strip() for k in (*PERIODS, "reason")}
    context = {"current": retention_get(tenant=principal.tenant), "periods": PERIODS, "typed": typed}
    try:
        given = {p: _days(p, typed[p]) for p in PERIODS}
        if "preview" in request.POST:
            affects = retention_affects(tenant=principal.tenant, **given)
            return page(
                request,
                principal,
                "console/retention.html",
                {**context, "affects": affects, "error": None},
                nav="retention",
            )
        with acting(principal):
            row = retention_set(tenant=principal.tenant, actor=principal.actor, reason=typed["reason"], **given)
        messages.success(request, f"Retention of {principal.tenant} saved (version {row.version}).")
        return redirect("ui:retention")
    except StewardError as exc:
        return page(
            request,
            principal,
            "console/retention.html",
            {**context, "affects": None, "error": exc},
            status=form_status(exc),
            nav="retention",
        )


@screen
def erasure_list(request, principal):
    context = {"receipts": receipt_page(tenant=principal.tenant), "typed": None, "preview": None, "error": None}
    return page(request, principal, "console/erasures.html", {**context, "places": PLACES}, nav="erasures")


@screen
def erasure_new(request, principal):
    """First the preview (what it will erase, per place); then, with `confirm`, the erasure,
    whose receipt records what the preview showed. A refusal keeps the form and says why."""
    if request.method != "POST":
        return redirect("ui:erasures")
    require(principal, OPERATE_ACTION)
    typed = {k: (request.POST.get(k) or "").strip() for k in ("kind", "value", "reason")}
    context = {"receipts": receipt_page(tenant=principal.tenant), "typed": typed, "places": PLACES}
    try:
        subject = Subject.of(kind=typed["kind"], tenant=principal.tenant, value=typed["value"] or None)
        if "confirm" not in request.POST:
            preview = erasure_preview(subject=subject)
            return page(
                request,
                principal,
                "console/erasures.html",
                {**context, "preview": preview, "error": None},
                nav="erasures",
            )
        with acting(principal):
            receipt = erasure_run(subject=subject, actor=principal.actor, reason=typed["reason"])
        messages.success(request, f"Erased {receipt.rows} rows; the receipt is signed.")
        return redirect("ui:erasure", receipt_id=receipt.id)
    except StewardError as exc:
        return page(
            request,
            principal,
            "console/erasures.html",
            {**context, "preview": None, "error": exc},
            status=form_status(exc),
            nav="erasures",
        )


@screen
def erasure_detail(request, principal, receipt_id):
    try:
        receipt = receipt_get(tenant=principal.tenant, receipt_id=receipt_id)
    except ErasureReceiptNotFound:
        raise Http404("no such receipt") from None
    context = {"receipt": receipt, "problems": receipt_check(receipt), "mac": bytes(receipt.mac).hex()}
    return page(request, principal, "console/erasure.html", context, nav="erasures")
