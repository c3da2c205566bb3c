"""Canonical JSON: what the journal, the ledger and digests store and compare, and the
one check of JSON that callers hand in (task input, operator receipts), shared by the
services, the CLI and the API. The limits are documented in docs/limits.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import traceback
from itertools import accumulate

from runtime import config
from runtime.errors import (
    InputTooDeep,
    InputTooLarge,
    InvalidEncoding,
    InvalidInput,
    InvalidString,
    NotJournalable,
    NumberOutOfRange,
    StewardError,
)

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_canonical = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True)

# Arrays and objects nested deeper than this are refused. Python's json recurses once per
# level in C, and a worker decodes input deep inside Celery's and the executor's frames:
# a 980-deep array passed the CLI and then raised RecursionError in a worker (issue 5).
# Agent inputs are records, not trees; 64 leaves them room.
MAX_DEPTH = 64
# Every number must be finite and within the signed 64-bit range. Python refuses to turn
# integers of more than 4,300 digits into text and back, other languages stop at 64 bits,
# and PostgreSQL prints jsonb numbers without an exponent, so a float of 1e20 comes back
# to the agent as the 21-digit integer 100000000000000000000: bounding floats by the same
# range keeps what the agent reads back within these limits too.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
_FLOAT_BOUND = 2.0**63
# JSON text may carry this many times the byte limit (room for indentation) before it is
# refused without parsing.
TEXT_SLACK = 4

_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # \u0000 not itself escaped (\\u0000)
_SURROGATE = re.compile("[\ud800-\udfff]")
# A string to its closing quote, or (unterminated) to the end of the text: every quote
# then starts at most one match, so stripping strings is linear on any text.
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")
_NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}


def encode(value, *, what: str = "output") -> str:
    """JSON text of a value the journal or the ledger will keep: a step's output, an
    agent's return value, a service's receipt. The same check as callers' JSON (plain()),
    against MAX_OUTPUT_BYTES: a value PostgreSQL would refuse (\\u0000), or a replay
    could not decode (nested past MAX_DEPTH), is refused before it is written, never
    by the database in the middle of an attempt.

    Raises NotJournalable, which agent code cannot catch: the call already took its seq.
    """
    try:
        # Keys JSON turns into strings (1 -> "1") are fine here: the agent gets the same
        # round trip on the first run and on every replay.
        return plain(
            value, what=what, limit=config.max_output_bytes(), setting="STEWARD_MAX_OUTPUT_BYTES", string_keys=False
        )
    except StewardError as exc:
        raise NotJournalable(f"{exc.message} [{exc.code}]") from None


def decode(text):
    return None if text is None else json.loads(text)


def digest(value) -> str:
    """sha256 of canonical JSON (sorted keys): equal values give equal digests."""
    return hashlib.sha256(_canonical.encode(value).encode()).hexdigest()


# --- JSON from callers ----------------------------------------------------------------


def plain(value, *, what: str, limit: int, setting: str = "", string_keys: bool = True) -> str:
    """The JSON text of `value`, or the StewardError that says why it cannot be stored:

    1. walk it without recursion: only dicts with string keys, lists, strings, finite
       numbers in the 64-bit range, booleans and null, nested at most MAX_DEPTH deep
       (INVALID_INPUT, INPUT_TOO_DEEP, NUMBER_OUT_OF_RANGE);
    2. encode it (C speed, and safe now that the depth is bounded);
    3. check the text once for \\u0000 and lone surrogates, in keys and values alike
       (INVALID_STRING), and its size in UTF-8 bytes against `limit` (INPUT_TOO_LARGE).
    """
    kind = type(value)
    if kind is int or kind is str or kind is bool or value is None:
        # Most step outputs: nothing to walk, and an int or a bool encodes to plain ASCII.
        if kind is int and not INT_MIN <= value <= INT_MAX:
            raise _out_of_range(what)
        if kind is not str:
            return _encoder.encode(value)
    else:
        _walk(value, what, limit, string_keys)
    try:
        text = _encoder.encode(value)
    except (TypeError, ValueError) as exc:  # a type the walk left to the encoder
        raise InvalidInput(f"{what} is not plain JSON: {exc}") from None
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise InvalidString(f"{what} holds the character \\u0000, which PostgreSQL cannot store")
    if not text.isascii() and _SURROGATE.search(text):
        raise InvalidString(f"{what} holds a lone surrogate (U+D800-U+DFFF), which is not UTF-8 text")
    if len(text) * 4 > limit and len(text.encode()) > limit:
        raise _too_large(what, limit, setting)
    return text


def parse(raw: str | bytes, *, what: str, limit: int, setting: str = ""):
    """Parse JSON text from outside (a CLI argument or file, later a request body) without
    ever raising RecursionError or a digit-limit ValueError: bytes must be UTF-8, the text
    at most TEXT_SLACK x `limit` long and nested at most MAX_DEPTH deep. NaN and Infinity
    are not JSON. The value still goes through plain() in the service that stores it."""
    if isinstance(raw, bytes):
        if len(raw) > TEXT_SLACK * limit:
            raise _too_large(what, limit, setting)
        try:
            raw = raw.decode("utf-8-sig")  # a byte order mark, as some editors write, is ignored (RFC 8259)
        except UnicodeDecodeError as exc:
            raise InvalidEncoding(f"{what} is not UTF-8: {exc.reason} at byte {exc.start}") from None
    if len(raw) > TEXT_SLACK * limit:
        raise _too_large(what, limit, setting)
    # Counting brackets is C speed; only text with many of them needs the real scan.
    if raw.count("[") + raw.count("{") > MAX_DEPTH and _depth(raw) > MAX_DEPTH:
        raise InputTooDeep(f"{what} nests arrays and objects more than {MAX_DEPTH} deep", max_depth=MAX_DEPTH)
    try:
        return _decoder.decode(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not JSON: {exc}") from None
    except ValueError as exc:  # an integer past Python's 4,300-digit limit
        raise NumberOutOfRange(f"{what} holds a number outside the 64-bit range: {str(exc)[:80]}") from None


def _walk(value, what: str, limit: int, string_keys: bool = True) -> None:
    """Structure, depth and number checks, iteratively. Every element costs at least one
    byte of JSON text, so a walk never visits more than `limit` of them."""
    if not isinstance(value, (dict, list, tuple)):
        _scalar(value, what)
        return
    budget = limit
    stack = [(value, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputTooDeep(f"{what} nests arrays and objects more than {MAX_DEPTH} deep", max_depth=MAX_DEPTH)
        budget -= len(container)
        if budget < 0:
            raise InputTooLarge(f"{what} has more elements than its {limit}-byte limit can hold", limit=limit)
        if isinstance(container, dict) and string_keys:
            for key in container:
                if type(key) is not str and not isinstance(key, str):
                    raise InvalidInput(
                        f"{what} is not plain JSON: object keys must be strings, not {type(key).__name__}"
                    )
        items = container.values() if isinstance(container, dict) else container
        for item in items:
            kind = type(item)
            # The common cases first, by exact type: this loop is on the submit path.
            if kind is str or kind is bool or item is None:
                continue
            if kind is int:
                if not INT_MIN <= item <= INT_MAX:
                    raise _out_of_range(what)
            elif kind is float:
                if not -_FLOAT_BOUND < item < _FLOAT_BOUND:  # also false for NaN
                    raise _out_of_range(what)
            elif isinstance(item, (dict, list, tuple)):
                stack.append((item, depth + 1))
            else:
                _scalar(item, what)


def _scalar(item, what: str) -> None:
    """Subclasses and the rest; what JSON cannot carry at all is left to the encoder."""
    if isinstance(item, bool) or item is None or isinstance(item, str):
        return
    if isinstance(item, int) and not INT_MIN <= item <= INT_MAX:
        raise _out_of_range(what)
    if isinstance(item, float) and not -_FLOAT_BOUND < item < _FLOAT_BOUND:
        raise _out_of_range(what)


def _depth(text: str) -> int:
    """How deep arrays and objects nest in JSON text, brackets inside strings aside. On
    malformed text the parser stops at the first error, and up to there this scan and
    the parser agree on where strings are."""
    brackets = _BRACKETS.findall(_STRINGS.sub("", text))
    return max(accumulate(map(_NESTING.__getitem__, brackets)), default=0)


def _not_a_number(name: str):
    raise NumberOutOfRange(f"{name} is not a JSON number")


_decoder = json.JSONDecoder(parse_constant=_not_a_number)


def _out_of_range(what: str) -> NumberOutOfRange:
    return NumberOutOfRange(
        f"{what} holds a number that is not finite or lies outside the signed 64-bit range [-2**63, 2**63 - 1]",
        min=INT_MIN,
        max=INT_MAX,
    )


def _too_large(what: str, limit: int, setting: str) -> InputTooLarge:
    return InputTooLarge(f"{what} is larger than {limit} bytes" + (f" ({setting})" if setting else ""), limit=limit)


def error_record(exc: BaseException) -> dict:
    """What the journal keeps of an exception: enough to re-raise it by type name and
    message on replay, and a short traceback for the operator. Exception text is
    anybody's (a service's error body), so it is made storable: \\u0000 and lone
    surrogates would make PostgreSQL refuse the whole journal row."""
    return {
        "type": type(exc).__name__,
        "message": storable_text(str(exc)[:2000]),
        "traceback": storable_text("".join(traceback.format_exception(exc, limit=8))[-4000:]),
    }


def storable_text(text: str) -> str:
    """`text` with what jsonb cannot hold replaced by U+FFFD."""
    if text.isascii():
        return text.replace("\x00", "\ufffd")
    return _SURROGATE.sub("\ufffd", text).replace("\x00", "\ufffd")
