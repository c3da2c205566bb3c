"""What the routers share: constrained query types, and the paged response.

The constraints live in the schema, so the OpenAPI document states them and a client
(or schemathesis) learns them from it; the runtime checks again whatever reaches it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Generic, TypeVar

from ninja import Query, Schema
from ninja.renderers import JSONRenderer
from ninja.responses import NinjaJSONEncoder
from pydantic import AfterValidator, AwareDatetime, Field, StringConstraints

T = TypeVar("T")

# Names a filter compares with a column (agent, actor, kind, pool): printable, no control
# characters. A NUL cannot even be sent to PostgreSQL; rejecting it here makes it a 422
# naming the field instead of an error from the driver.
PRINTABLE = r"^[^\x00-\x1f\x7f]+$"
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=PRINTABLE)]
PoolName = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9_.-]*$")]


def _in_utc(value: datetime) -> datetime:
    # PostgreSQL compares in UTC, and an offset can carry a valid local time past
    # datetime's range there (9999-12-31T23:59-23:59): refuse it here as a field error.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("this time, in UTC, is outside years 1 to 9999") from None


# A time a filter compares with: with its offset (a naive time would mean the server's
# zone), and within datetime's range in UTC.
Moment = Annotated[AwareDatetime, AfterValidator(_in_utc)]

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
