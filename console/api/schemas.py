"""What the routers share: constrained query types, request bodies, and the paged response.

The constraints live in the schema, so the OpenAPI document states them and a client
(or schemathesis) learns them from it; the runtime checks again whatever reaches it.
What the schema calls valid, the parser accepts, and nothing else: a request the
schema does not describe is INVALID_REQUEST, never read some other way.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from ninja import Query, Schema
from ninja.renderers import JSONRenderer
from ninja.responses import NinjaJSONEncoder
from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Field, StringConstraints, model_validator

T = TypeVar("T")

# Names a filter compares with a column (agent, actor, kind, pool): printable, no control
# characters. A NUL cannot even be sent to PostgreSQL; rejecting it here makes it a 422
# naming the field instead of an error from the driver.
PRINTABLE = r"^[^\x00-\x1f\x7f]+$"
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=PRINTABLE)]
# A name in a path: no "/", which Django would read as the next segment of the path (an
# agent named "x/switch" would reach another route).
PathName = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f/]+$")]
# steward_pool.name is a slug (runtime/arguments.py pool_name): the same rule here.
PoolName = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")]


# A whole number in a path or a query is its digits, as the schema's "integer" reads on
# the wire (an optional sign): pydantic alone also reads " 5 ", "5.0" and "5_000".
def _whole_number(value: Any) -> Any:
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and _DIGITS.match(value))):
        raise ValueError("a whole number, in digits")
    return value


_DIGITS = re.compile(r"[+-]?[0-9]+\Z")
Int = Annotated[int, BeforeValidator(_whole_number)]


# A whole number in a JSON body is a JSON number with no fraction (JSON Schema's
# "integer": 5 and 5.0 alike), never a string or a boolean, which pydantic alone reads.
def _json_integer(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("a whole number, as a JSON number")
    return value


JsonInt = Annotated[int, BeforeValidator(_json_integer)]


def bounded(kind, **bounds):
    """`kind` (Int or JsonInt) within bounds (ge=, le=). The bounds go inside the check
    on the value's form: put outside it (`Field(ge=1)` on `JsonInt | None`), pydantic
    enforces them but writes them into the schema as "ge" and "le", which JSON Schema
    does not know, and the document loses them (tests/api/test_schema.py)."""
    base, check = kind.__origin__, kind.__metadata__
    return Annotated[base, Field(**bounds), *check]


# An id as the schema's "format": "uuid" says: 8-4-4-4-12 hex digits. Pydantic alone also
# reads them without hyphens, in braces or as a urn.
def _hyphenated(value: Any) -> Any:
    if isinstance(value, str) and not _UUID.match(value):
        raise ValueError("a UUID in its hyphenated form, such as 0190f4a2-8d1c-7c3e-9f10-2b6a1e7d4c55")
    return value


_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\Z")
Uuid = Annotated[uuid.UUID, BeforeValidator(_hyphenated)]


# RFC 3339's date-time, which the schema's `"format": "date-time"` names, less what no
# datetime holds (a leap second, year 0). Pydantic alone also reads "0.5" or
# "1700000000" as Unix times and "2026-12-01 09:00Z" as a time: the schema says none of
# them is one, so none is accepted.
RFC3339 = (
    r"^([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-[0-9]{2}-[0-9]{2}"
    r"[Tt][0-9]{2}:[0-9]{2}:[0-5][0-9](\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)


def _rfc3339(value: Any) -> Any:
    if not isinstance(value, str) or not re.match(RFC3339, value):
        raise ValueError("a time is an RFC 3339 date-time with its offset, such as 2026-12-01T09:00:00Z")
    return value


def _in_utc(value: datetime) -> datetime:
    # PostgreSQL compares in UTC, and an offset can carry a valid local time past
    # datetime's range there (0001-01-01T00:00+01:00, 9999-12-31T23:59-23:59). No stored
    # time lies beyond that range, so its end compares with every one as the time sent
    # would: a filter from it, or an expiry at it, means what was asked.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC) if value.year == 1 else datetime.max.replace(tzinfo=UTC)


# A time a filter compares with, or an expiry: with its offset (a naive time would mean
# the server's zone), in UTC.
Moment = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339),
    AfterValidator(_in_utc),
    Field(json_schema_extra={"pattern": RFC3339}),
]


class Body(Schema):
    """A request body: a JSON object. Ninja's Schema reads any value's attributes, so
    with every field optional a list, a number or a string would pass as an empty object
    (PATCH /pools/default with `[null, null]` did)."""

    @model_validator(mode="wrap")
    @classmethod
    def _an_object(cls, value, handler):
        if not isinstance(value, dict):
            raise ValueError("the body must be a JSON object")
        return handler(value)


MAX_LIMIT = 500  # runtime/paging.py MAX_LIMIT: the largest page any list serves


def limit_query():
    return Query(50, ge=1, le=MAX_LIMIT, description="items per page (1-500)")


def cursor_query():
    # A cursor is base64url (runtime/paging.py); anything else is refused by its alphabet here.
    return Query(None, max_length=1000, pattern=r"^[A-Za-z0-9_-]+$", description="next_cursor of the previous page")


class Page(Schema, Generic[T]):
    """One page, newest first. `next_cursor` is null on the last page; a page with a
    residual filter may be short, even empty, and still carry a cursor (read on)."""

    items: list[T]
    next_cursor: str | None = Field(None, description="pass as ?cursor= for the next page")


def page_of(page, convert) -> dict:
    return {"items": [convert(item) for item in page.items], "next_cursor": page.next}


class Encoder(NinjaJSONEncoder):
    """Times to the microsecond, as stored. Django's encoder cuts them to milliseconds,
    and an audit row's `at` is part of its hash: an export must carry it exactly for a
    copy to be re-verified, and a `since` taken from a listed time must not skip ahead."""

    def default(self, o):
        if isinstance(o, datetime):
            return o.isoformat()
        return super().default(o)


class Renderer(JSONRenderer):
    encoder_class = Encoder
