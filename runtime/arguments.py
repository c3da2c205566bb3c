"""Arguments every entry point checks the same way (the services, the CLI, later the API):
identifiers against the columns that store them, free text against what PostgreSQL can
store, counts and durations against documented bounds (docs/limits.md).

Refusals are StewardErrors with stable codes and never echo more than a short, escaped
prefix of what was given: the argument may be megabytes long or full of control
characters, and the message goes to a terminal.
"""

from __future__ import annotations

import math
import re
import uuid

from runtime.errors import (
    ArgumentOutOfRange,
    EffectNotFound,
    InvalidArgument,
    InvalidIdentifier,
    InvalidInput,
    InvalidString,
    TaskNotFound,
)

# Column lengths (runtime/models/).
TENANT_MAX = 100  # steward_task.tenant, steward_audit.tenant
ACTOR_MAX = 200  # steward_task.owner, steward_audit.actor, steward_effect.resolved_by
KEY_MAX = 200  # steward_task.idempotency_key
AGENT_MAX = 200  # steward_task.agent
POOL_MAX = 100  # steward_pool.name
# Operator notes and reasons go into audit rows and the effect ledger; 2,000 characters
# say why without turning the audit trail into a document store.
NOTE_MAX = 2000
# A list command or API page shows at most this many rows.
PAGE_MAX = 1000
# steward_effect.id is a bigint.
EFFECT_ID_MAX = 2**63 - 1

# steward_pool.name is a SlugField: ASCII letters, digits, hyphens and underscores.
_SLUG = re.compile(r"[A-Za-z0-9_-]+\Z")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def identifier(field: str, value, *, max_length: int) -> str:
    """A name stored in a column of `max_length` characters: 1 to max_length printable
    characters (no control characters, no NUL, no lone surrogates)."""
    if not isinstance(value, str) or not value or len(value) > max_length or not value.isprintable():
        raise InvalidIdentifier(
            f"{field} must be 1-{max_length} printable characters, got {_show(value)}",
            field=field,
            max_length=max_length,
        )
    return value


def tenant(value) -> str:
    return identifier("tenant", value, max_length=TENANT_MAX)


def actor(value, field: str = "actor") -> str:
    return identifier(field, value, max_length=ACTOR_MAX)


def agent_name(value) -> str:
    return identifier("agent", value, max_length=AGENT_MAX)


def idempotency_key(value) -> str | None:
    return None if value is None else identifier("idempotency_key", value, max_length=KEY_MAX)


def pool_name(value, field: str = "pool") -> str:
    """A pool name is a slug of at most 100 characters: `bad pool!` is refused."""
    if not isinstance(value, str) or len(value) > POOL_MAX or not _SLUG.match(value):
        raise InvalidIdentifier(
            f"{field} must be a slug of 1-{POOL_MAX} letters, digits, '-' or '_', got {_show(value)}",
            field=field,
            max_length=POOL_MAX,
        )
    return value


def text(field: str, value, *, max_length: int = NOTE_MAX) -> str:
    """Free text (a note, a reason): newlines are fine, NUL and lone surrogates are not."""
    if not isinstance(value, str) or len(value) > max_length:
        raise InvalidString(
            f"{field} must be text of at most {max_length} characters", field=field, max_length=max_length
        )
    if _UNSTORABLE.search(value):
        raise InvalidString(f"{field} holds \\u0000 or a lone surrogate, which cannot be stored", field=field)
    return value


def bounded(field: str, value, *, minimum: float, maximum: float, integer: bool = True):
    """A count (integer) or a duration (finite float) within [minimum, maximum]."""
    kinds = (int,) if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or (isinstance(value, float) and not math.isfinite(value))
        or not minimum <= value <= maximum
    ):
        raise ArgumentOutOfRange(
            f"{field} must be {'an integer' if integer else 'a number'} from {minimum:g} "
            f"to {maximum:g}, got {_show(value)}",
            field=field,
            min=minimum,
            max=maximum,
        )
    return value


# The breakers' limits (runtime/limits/breakers.py) and the largest value each may take:
# seq is an integer column; a depth past a thousand is a recursion, not a tree; a rate of
# a million spawns a minute or ten years of wall clock is as good as none.
BREAKER_LIMITS = {
    "max_children": 1_000_000,
    "max_depth": 1_000,
    "max_spawns_per_minute": 1_000_000,
    "max_steps": 2**31 - 1,
    "max_wall_clock_seconds": 10 * 366 * 86_400,
}


def breaker_limits(value, field: str = "limits") -> dict[str, int]:
    """Breaker limits, as an agent declares them or an operator overrides them: an object
    whose keys are BREAKER_LIMITS and whose values are integers from 1 to each maximum
    (INVALID_ARGUMENT for another shape or key, ARGUMENT_OUT_OF_RANGE for a value)."""
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{field} must be an object of breaker limits, got {type(value).__name__}",
            field=field,
            known=sorted(BREAKER_LIMITS),
        )
    unknown = [key for key in value if key not in BREAKER_LIMITS]
    if unknown:
        raise InvalidArgument(
            f"{field}: not a breaker limit: {_show(unknown[0])} (known: {', '.join(BREAKER_LIMITS)})",
            field=field,
            known=sorted(BREAKER_LIMITS),
        )
    return {
        key: bounded(f"{field}.{key}", value[key], minimum=1, maximum=BREAKER_LIMITS[key])
        for key in BREAKER_LIMITS
        if key in value
    }


def task_id(value) -> uuid.UUID:
    """A task id is a UUID; anything else names no task."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        if not isinstance(value, str) or len(value) > 36:
            raise ValueError
        return uuid.UUID(value)
    except ValueError:
        raise TaskNotFound(f"no task {_show(value)}", task=_show(value)) from None


# A task id in its canonical form: 8-4-4-4-12 hex digits. `h` is a hex digit's place.
_CANONICAL = "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh"
_HEX = frozenset("0123456789abcdef")


def task_id_prefix(value) -> str:
    """The hex digits (1 to 32, lower case) of a task id or of its start, as an operator
    types it: the canonical form cut anywhere (`01a230af-d9`), or hex digits without
    hyphens. Anything else (empty, too long, not hex, a hyphen out of place) names no task.
    """
    if isinstance(value, uuid.UUID):
        return value.hex
    text = value.lower() if isinstance(value, str) else ""
    if "-" not in text and 0 < len(text) <= 32 and set(text) <= _HEX:
        return text
    if (
        "-" in text
        and len(text) <= len(_CANONICAL)
        and all((c in _HEX) if place == "h" else c == "-" for c, place in zip(text, _CANONICAL, strict=False))
    ):
        return text.replace("-", "")
    raise TaskNotFound(f"no task {_show(value)}: a task id is hex digits, whole or a unique prefix", task=_show(value))


def task_filter(value, field: str) -> uuid.UUID | None:
    """A task id given as a filter (parent=, root=, task=): malformed, it is bad input
    (INVALID_INPUT), not a task that was looked for and not found."""
    if value is None:
        return None
    try:
        return task_id(value)
    except TaskNotFound:
        raise InvalidInput(f"{field} must be a task id, got {_show(value)}", field=field) from None


def effect_id(value) -> int:
    """An effect id is a positive bigint; anything else names no effect."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= EFFECT_ID_MAX:
        raise EffectNotFound(f"no effect #{_show(value)}", effect=_show(value))
    return value


def show(value, width: int = 40) -> str:
    """A short, escaped rendering of what was given, safe for a terminal: for a refusal
    raised outside this module (runtime/authz/) to name the argument the same way."""
    return _show(value, width)


def _show(value, width: int = 40) -> str:
    """A short, escaped rendering of what was given, safe for a terminal."""
    if isinstance(value, str):
        shown = repr(value[: width + 1])
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        shown = f"an integer of {value.bit_length()} bits"  # repr() refuses past 4,300 digits
    else:
        shown = repr(value)[: width + 10]
    shown = shown.encode("ascii", "backslashreplace").decode()
    return shown if len(shown) <= width else shown[: width - 3] + "..."
