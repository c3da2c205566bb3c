"""Canonical JSON: what the journal, the ledger and digests store and compare."""

from __future__ import annotations

import hashlib
import json
import traceback

from runtime import config
from runtime.errors import OutputTooLarge

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_canonical = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True)


def encode(value, *, what: str = "output", limit: int | None = None) -> str:
    """JSON text of a value the journal will replay. Raises TypeError/ValueError for
    values JSON cannot carry (sets, objects, NaN), and OutputTooLarge past `limit`
    bytes (MAX_OUTPUT_BYTES unless given)."""
    text = _encoder.encode(value)
    limit = config.max_output_bytes() if limit is None else limit
    # A character is at most 4 bytes: only count bytes when the cheap bound is not enough.
    if len(text) * 4 > limit and len(text.encode()) > limit:
        raise OutputTooLarge(f"{what} is {len(text.encode())} bytes; the limit is {limit}")
    return text


def decode(text):
    return None if text is None else json.loads(text)


def digest(value) -> str:
    """sha256 of canonical JSON (sorted keys): equal values give equal digests."""
    return hashlib.sha256(_canonical.encode(value).encode()).hexdigest()


def error_record(exc: BaseException) -> dict:
    """What the journal keeps of an exception: enough to re-raise it by type name and
    message on replay, and a short traceback for the operator."""
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": "".join(traceback.format_exception(exc, limit=8))[-4000:],
    }
