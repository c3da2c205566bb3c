"""Reads of the lifecycle: a tenant's retention and what a change would affect, an
erasure's preview, and the receipts."""

from __future__ import annotations

from runtime import arguments
from runtime.errors import ErasureReceiptNotFound
from runtime.lifecycle.erasure import Preview, erasure_preview, receipt_check
from runtime.lifecycle.registry import PLACES, REDIS_PLACES, SubjectKind
from runtime.lifecycle.retention import MAX_DAYS, PERIODS, retention_affects, retention_get
from runtime.models import ErasureReceipt

__all__ = [
    "MAX_DAYS",
    "PERIODS",
    "PLACES",
    "REDIS_PLACES",
    "Preview",
    "SubjectKind",
    "erasure_preview",
    "receipt_check",
    "receipt_get",
    "receipt_page",
    "retention_affects",
    "retention_get",
]

PAGE = 50


def receipt_page(*, tenant: str, before=None, limit: int = PAGE) -> list[ErasureReceipt]:
    """A tenant's receipts, newest first (ids are time-ordered)."""
    arguments.tenant(tenant)
    rows = ErasureReceipt.objects.filter(tenant=tenant)
    if before is not None:
        rows = rows.filter(id__lt=before)
    return list(rows.order_by("-id")[:limit])


def receipt_get(*, tenant: str, receipt_id) -> ErasureReceipt:
    """One receipt of the tenant; another tenant's is not found, like a missing one."""
    row = ErasureReceipt.objects.filter(tenant=tenant, id=receipt_id).first()
    if row is None:
        raise ErasureReceiptNotFound(f"no erasure receipt {receipt_id}", receipt_id=str(receipt_id))
    return row
