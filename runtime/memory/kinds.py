"""Memory kinds: what an agent may store, declared like an agent is.

    from pydantic import BaseModel
    from runtime.memory.kinds import memory_kind, memory_upgrade

    @memory_kind("customer_note", version=2)
    class CustomerNote(BaseModel):
        text: str
        priority: int = 0

    @memory_upgrade("customer_note", from_version=1)
    def note_v2(payload: dict) -> dict:
        return {**payload, "priority": 0}

A kind's name and its versions are stable identifiers, as an agent's are: records keep
the schema version they were written at. Raising a kind's version needs an upgrade from
every earlier version still stored (as Django's migrations chain); a record is upgraded
lazily when an agent reads it, or by `steward memory upgrade`, and each upgrade is a new
version of the record, audited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from runtime import encoding
from runtime.errors import (
    InvalidInput,
    MemoryKindUnknown,
    MemoryUpgradeMissing,
    MemoryValueInvalid,
    NotJournalable,
    StewardError,
)

NAME_MAX = 100
KEY_MAX = 200
VERSION_MAX = 10_000


@dataclass(frozen=True)
class MemoryKind:
    name: str
    version: int  # the current schema version: what new records are written at
    model: Any  # the pydantic model class of the current version


_kinds: dict[str, MemoryKind] = {}
_upgrades: dict[tuple[str, int], Callable[[dict], dict]] = {}  # (kind, from_version) -> fn


def _name(value, field: str, limit: int) -> str:
    """A kind's name or a record's key: 1-`limit` printable characters and no '/', since
    each record has a URL (/agents/<agent>/memory/<kind>/<key>/)."""
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.isprintable() or "/" in value:
        raise InvalidInput(f"a memory {field} is 1-{limit} printable characters, with no '/'", field=field)
    return value


def kind_name(value) -> str:
    return _name(value, "kind", NAME_MAX)


def record_key(value) -> str:
    return _name(value, "key", KEY_MAX)


def memory_kind(name: str, *, version: int = 1):
    """Declare the pydantic model class it decorates as the kind `name` at schema `version`."""
    try:
        kind_name(name)
    except StewardError as exc:
        raise ValueError(exc.message) from None
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= VERSION_MAX:
        raise ValueError(f"memory kind {name!r}: version is an integer from 1 to {VERSION_MAX}")

    def register(model):
        if not hasattr(model, "model_validate"):
            raise ValueError(f"memory kind {name!r}: declare it on a pydantic model class, got {model!r}")
        existing = _kinds.get(name)
        if existing is not None and existing.model is not model and existing.version >= version:
            raise ValueError(f"memory kind {name!r} version {existing.version} is already declared")
        _kinds[name] = MemoryKind(name, version, model)
        return model

    return register


def memory_upgrade(name: str, *, from_version: int):
    """Register fn(payload: dict) -> dict, which carries a payload of kind `name` from
    schema version `from_version` to `from_version + 1`."""

    def register(fn):
        if (name, from_version) in _upgrades and _upgrades[(name, from_version)] is not fn:
            raise ValueError(f"memory kind {name!r} already has an upgrade from version {from_version}")
        _upgrades[(name, from_version)] = fn
        return fn

    return register


def kind_get(name: str) -> MemoryKind:
    kind = _kinds.get(kind_name(name))
    if kind is None:
        raise MemoryKindUnknown(f"no memory kind is declared as {name!r}", kind=name, known=sorted(_kinds))
    return kind


def kinds() -> list[MemoryKind]:
    return [_kinds[n] for n in sorted(_kinds)]


def validated(kind: MemoryKind, value) -> dict:
    """`value` (a model instance or plain JSON) as the kind's model dumps it: the payload
    stored, checked against the model and against the journal's JSON limits."""
    try:
        instance = value if isinstance(value, kind.model) else kind.model.model_validate(value)
        payload = instance.model_dump(mode="json")
    except ValidationError as exc:
        raise MemoryValueInvalid(
            f"the value does not fit memory kind {kind.name!r} v{kind.version}: {exc.error_count()} error(s)",
            kind=kind.name,
            errors=[{"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in exc.errors()[:10]],
        ) from None
    try:
        encoding.encode(payload, what="the memory value")
    except NotJournalable as exc:
        raise MemoryValueInvalid(f"the memory value cannot be stored: {exc}", kind=kind.name) from None
    return payload


def upgraded(kind: MemoryKind, payload: dict, schema_version: int) -> list[tuple[int, dict]]:
    """Each step of carrying `payload` from `schema_version` to the kind's current one:
    [(version reached, payload), ...] (empty if it is current). The last is checked
    against the current model. MEMORY_UPGRADE_MISSING if a step has no function."""
    steps = []
    for at in range(schema_version, kind.version):
        fn = _upgrades.get((kind.name, at))
        if fn is None:
            raise MemoryUpgradeMissing(
                f"memory kind {kind.name!r} has no upgrade from version {at} to {at + 1}",
                kind=kind.name,
                from_version=at,
            )
        payload = fn(dict(payload))
        steps.append((at + 1, payload))
    if steps:
        steps[-1] = (kind.version, validated(kind, steps[-1][1]))
    return steps
