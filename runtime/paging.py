"""Keyset pages: every list in Steward (CLI today, the API and console next) pages the same
way, newest first, from an index, with an opaque cursor.

A page is read by walking one index (the list's *driving* index) from just past the
cursor's key, so its cost is the page's size, whatever the table's: no OFFSET, no count,
no sort. The key is unique and never changes, so while new rows arrive a walk never
repeats a row and never skips one that existed when it started (a row inserted behind
the cursor meanwhile may or may not be seen: it was not there when the walk began).

Filters the driving index does not cover (an agent, with a status, say) are *residual*:
they are checked within a window of at most SCAN_BUDGET index entries past the cursor.
Such a page may hold fewer than `limit` items, even none, and still carry a `next`
cursor: the cost of a page stays bounded however rare the filtered rows are, and the
caller decides whether to read on.

A cursor is base64url JSON: [version, list name, filter fingerprint, key...]. It is
refused (INVALID_INPUT) on another list or with other filters, where its key would
mean nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from django.db.models import QuerySet

from runtime.errors import InvalidInput

T = TypeVar("T")

CURSOR_VERSION = 1
MAX_LIMIT = 500
SCAN_BUDGET = 5000  # index entries a page with residual filters may walk


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next: str | None  # the cursor of the page after this one; None: this is the last

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class Keyset:
    """How one list is ordered: newest first by `fields` (unique together, immutable).
    `encode`/`decode` turn one row's key values into JSON values and back."""

    name: str
    fields: tuple[str, ...]
    encode: Callable[[tuple], list]
    decode: Callable[[list], tuple]


def check_limit(limit) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}", field="limit")
    return limit


def fingerprint(keyset: Keyset, filters: dict) -> str:
    canonical = json.dumps([keyset.name, sorted((k, str(v)) for k, v in filters.items() if v is not None)])
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def encode_cursor(keyset: Keyset, filters: dict, key: tuple) -> str:
    raw = json.dumps(
        [CURSOR_VERSION, keyset.name, fingerprint(keyset, filters), *keyset.encode(key)], separators=(",", ":")
    )
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(keyset: Keyset, filters: dict, cursor: str) -> tuple:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, name, print_, *key = json.loads(raw)
        if (version, name) != (CURSOR_VERSION, keyset.name):
            raise ValueError("another list")
        if print_ != fingerprint(keyset, filters):
            raise ValueError("other filters")
        return keyset.decode(key)
    except (binascii.Error, UnicodeDecodeError, TypeError, ValueError) as exc:
        raise InvalidInput(f"not a cursor of this list with these filters ({exc})", field="after") from None


OPERATORS = {"exact": "=", "gte": ">=", "lt": "<"}


def keyset_page(
    driving: QuerySet,
    *,
    keyset: Keyset,
    filters: dict,
    after: str | None,
    limit: int,
    residual: dict | None = None,
    past: Callable[[QuerySet, tuple], QuerySet] | None = None,
) -> Page:
    """One page of `driving` (a queryset its index serves in keyset order), newest first.

    `past(qs, key)` narrows a queryset to rows after `key` in that order; the default
    handles a one-field key (`field < value`). With `residual` ({"field": value,
    "field__gte": value, "field__lt": value}), the page is the rows among the next
    SCAN_BUDGET entries that also match it.
    """
    check_limit(limit)
    order = [f"-{f}" for f in keyset.fields]
    past = past or (lambda qs, key: qs.filter(**{f"{keyset.fields[0]}__lt": key[0]}))
    walk = driving.order_by(*order)
    if after is not None:
        walk = past(walk, decode_cursor(keyset, filters, after))

    def key_of(row) -> tuple:
        return tuple(getattr(row, f) for f in keyset.fields)

    if not residual:
        rows = list(walk[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        return Page(rows, encode_cursor(keyset, filters, key_of(rows[-1])) if more else None)

    rows = _within_window(walk, keyset, residual, limit + 1)
    if len(rows) > limit:
        rows = rows[:limit]
        return Page(rows, encode_cursor(keyset, filters, key_of(rows[-1])))
    # Fewer matches than asked for: go on from the window's end, if the window was full.
    last = list(walk.values_list(*keyset.fields)[SCAN_BUDGET - 1 : SCAN_BUDGET])
    return Page(rows, encode_cursor(keyset, filters, tuple(last[0])) if last else None)


def _within_window(walk: QuerySet, keyset: Keyset, residual: dict, n: int) -> list:
    """The first `n` rows of the window (the walk's next SCAN_BUDGET rows) that match
    `residual`. The window is a derived table with its own LIMIT, which PostgreSQL cannot
    flatten: it is read off the driving index and then filtered. (Written as `pk IN
    (window)`, the planner was free to, and did, hash-join the window against a scan
    of the whole table.)"""
    model = walk.model
    inner, params = walk[:SCAN_BUDGET].query.sql_with_params()
    where, values = [], []
    for lookup, value in residual.items():
        name, _, op = lookup.partition("__")
        where.append(f'w."{model._meta.get_field(name).column}" {OPERATORS[op or "exact"]} %s')
        values.append(value)
    direction = ", ".join(f'w."{model._meta.get_field(f).column}" DESC' for f in keyset.fields)
    sql = f"SELECT * FROM ({inner}) AS w WHERE {' AND '.join(where)} ORDER BY {direction} LIMIT %s"
    return list(model.objects.raw(sql, [*params, *values, n]))
