"""Principals, actions and resource patterns: their forms, and the prefix rule that says
whether one resource pattern lies within another.

A resource is an exact value or a prefix pattern: `*` may appear only as its last
character, and `p*` covers every resource starting with `p` (`*` alone covers all).
Allowing `*` anywhere would make "is this narrowing narrower?" a glob-inclusion problem;
with prefixes it is one startswith, the same test in Python here and in SQL (migration
0011's trigger, runtime/sql/authz_decide.sql).
"""

from __future__ import annotations

import re

from runtime import arguments
from runtime.errors import InvalidIdentifier, InvalidResourcePattern

ACTION_MAX = 100  # steward_grant.action
RESOURCE_MAX = 500  # steward_grant.resource
SCOPE_MAX = 100  # entries in a child's requested scope

PERSON = "user:"
AGENT = "agent:"
# The demo's seed (console/dev/demo/seed.py, debug only): the one actor that is not a
# person and may still give a grant, through grant_seed alone, so that what it gives is
# audited as the seed and never as a person (migration 0023 lets granted_by name it).
SEED = "system:seed"
# What an action looks like: `model.chat`, `tool.search`, `http.post`.
_ACTION = re.compile(r"[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*\Z")


def principal(value, field: str = "principal") -> str:
    """`agent:<name>` or `user:<name>`, fitting steward_grant.principal."""
    arguments.actor(value, field)
    if not (value.startswith(AGENT) or value.startswith(PERSON)) or value in (AGENT, PERSON):
        raise InvalidIdentifier(
            f"{field} must be agent:<name> or user:<name>, got {arguments.show(value)}", field=field
        )
    return value


def is_person(actor: str) -> bool:
    return isinstance(actor, str) and actor.startswith(PERSON) and len(actor) > len(PERSON)


def action(value, field: str = "action") -> str:
    arguments.identifier(field, value, max_length=ACTION_MAX)
    if not _ACTION.match(value):
        raise InvalidIdentifier(
            f"{field} must be dotted lower-case words like model.chat, got {arguments.show(value)}", field=field
        )
    return value


def resource(value, field: str = "resource") -> str:
    """A resource or a pattern: printable, at most RESOURCE_MAX, `*` only at the end."""
    if not isinstance(value, str) or not value or len(value) > RESOURCE_MAX or not value.isprintable():
        raise InvalidResourcePattern(
            f"{field} must be 1-{RESOURCE_MAX} printable characters, got {arguments.show(value)}", field=field
        )
    if "*" in value[:-1]:
        raise InvalidResourcePattern(
            f"{field} may hold `*` only as its last character (a prefix pattern), got {arguments.show(value)}",
            field=field,
        )
    return value


def concrete(value, field: str = "resource") -> str:
    """The resource an action is taken on: exact, never a pattern."""
    resource(value, field)
    if value.endswith("*"):
        raise InvalidResourcePattern(f"{field} names one resource; a pattern is for grants", field=field)
    return value


def covers(pattern: str, value: str) -> bool:
    """Whether `pattern` covers `value` (a resource, or another pattern: then every
    resource the value covers)."""
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return value == pattern


def meet(a: str, b: str) -> str | None:
    """The pattern covering exactly what both cover, or None when nothing is in both:
    prefix sets are nested or disjoint, so the meet is always one of the two."""
    if covers(a, b):
        return b
    if covers(b, a):
        return a
    return None


def scope(value, field: str = "requested_scope") -> list[dict] | None:
    """A child's requested scope: None (whatever its parent holds) or a list of at most
    SCOPE_MAX {"action", "resource"} objects."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > SCOPE_MAX:
        raise InvalidResourcePattern(
            f"{field} must be a list of at most {SCOPE_MAX} {{action, resource}} objects", field=field
        )
    out = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != {"action", "resource"}:
            raise InvalidResourcePattern(f"each entry of {field} is exactly {{action, resource}}", field=field)
        out.append({"action": action(entry["action"]), "resource": resource(entry["resource"])})
    return out
