"""Small filters the console's templates share: short ids, ages, durations, hashes, JSON,
and what an operator may do to a task (runtime/tasks/actions.py: never a status compared)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from runtime.tasks.actions import FACTS, task_actions

register = template.Library()

# Statuses and states that need a person: the one accent colour marks them.
NEEDS_ACTION = {"failed", "blocked", "dead", "unknown", "expired"}


@register.filter
def short(value) -> str:
    """A task id's first 13 characters (time-ordered ids differ late, so not fewer)."""
    return str(value)[:13]


@register.filter
def needs_action(value) -> bool:
    return str(value) in NEEDS_ACTION


@register.filter
def may(task, action: str) -> bool:
    """`{% if child|may:"stop" %}`: whether an operator may take the action on the task."""
    return task_actions(task).of(action).allowed


@register.filter
def task_is(task, fact: str) -> bool:
    """`{% if task|task_is:"finished" %}`: a TaskActions flag (finished, stopping, running,
    denied, tripped, paused); a name that is none of them is an error, not a quiet false."""
    if fact not in FACTS:
        raise template.TemplateSyntaxError(f"task_is: {fact!r} is not one of {sorted(FACTS)}")
    return getattr(task_actions(task), fact)


@register.filter
def ago(value: datetime | None) -> str:
    """`12 s ago`, `in 4 s`: compact, for heartbeats and lease expiries."""
    if value is None:
        return "—"
    delta = (timezone.now() - value).total_seconds()
    words = seconds(abs(delta))
    return f"{words} ago" if delta >= 0 else f"in {words}"


@register.filter
def ago_live(value: datetime | None) -> str:
    """`ago`, in a <time> that static/console.js keeps counting: on a page whose refresh
    answers 204 while nothing changed (the dashboard), "12.0 s ago" would otherwise stay
    what it said when it was last built."""
    if value is None:
        return "—"
    return format_html('<time datetime="{}" data-ago>{}</time>', value.isoformat(), ago(value))


@register.filter
def seconds(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, timedelta):
        value = value.total_seconds()
    value = float(value)
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{int(value // 60)} min {int(value % 60)} s"
    if value < 86400:
        return f"{int(value // 3600)} h {int(value % 3600 // 60)} min"
    return f"{int(value // 86400)} d {int(value % 86400 // 3600)} h"


@register.filter
def took(obj) -> str:
    """How long a step (or anything with started_at and finished_at) took."""
    start, end = getattr(obj, "started_at", None), getattr(obj, "finished_at", None)
    return seconds((end - start).total_seconds()) if start and end else "—"


@register.filter
def chain_kind(chain) -> str:
    """What an audit chain is of, from its name: `task` (task:<id>) or `tenant` (tenant:<slug>)."""
    return str(chain).split(":", 1)[0]


@register.filter
def hexhash(value) -> str:
    return bytes(value).hex() if value is not None else ""


@register.filter
def pretty(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


# What json_script escapes, so the text cannot end its <script> element early.
_SCRIPT_SAFE = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


@register.filter
def json_text(value) -> str:
    """JSON for the inside of a <script type="application/json"> the template writes itself
    (json_script writes the whole element, and an out-of-band swap needs an attribute on it)."""
    return mark_safe(json.dumps(value, cls=DjangoJSONEncoder).translate(_SCRIPT_SAFE))


@register.filter
def compact(value, width: int = 80) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= int(width) else text[: int(width) - 1] + "…"


@register.filter
def get(mapping, key):
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def attr_seq(step):
    return getattr(step, "seq", "")


@register.filter
def grant_state(grant) -> str:
    """`live`, `revoked` or `expired`: in words, the same rule as the grants filter."""
    if grant.revoked_at is not None:
        return "revoked"
    if grant.expires_at is not None and grant.expires_at <= timezone.now():
        return "expired"
    return "live"


@register.filter
def principal_url(value: str) -> str:
    """An agent's page or a person's owner page."""
    kind, _, name = str(value).partition(":")
    return f"/agents/{name}/" if kind == "agent" else f"/owners/{name}/"


BOUNDARY_NAMES = {
    "worker": "worker",
    "storage": "storage",
    "credential_gateway": "credential gateway",
    "scheduler": "scheduler",
}


@register.filter
def boundary_name(value) -> str:
    """A stop boundary in words (credential_gateway: credential gateway)."""
    return BOUNDARY_NAMES.get(str(value), str(value))


def _word(item) -> str:
    """One reported value in words: nothing as "none", flags as yes or no, a list of
    plain values comma-separated; anything else as compact JSON."""
    if item is None or item in ([], {}):
        return "none"
    if isinstance(item, bool):
        return "yes" if item else "no"
    if isinstance(item, str):
        return item
    if isinstance(item, list) and all(isinstance(x, (str, int, float)) for x in item):
        return ", ".join(map(str, item))
    return json.dumps(item, cls=DjangoJSONEncoder, ensure_ascii=False)


@register.filter
def pairs(value, width: int = 140) -> str:
    """What a boundary reported, as `key: value · key: value` in one line of at most
    `width` characters (values in words: _word)."""
    if not isinstance(value, dict):
        return compact(value, width)
    parts = [f"{str(key).replace('_', ' ')}: {_word(item)}" for key, item in value.items()]
    line = " · ".join(parts)
    return line if len(line) <= width else line[: width - 1] + "…"
