"""Plain-text rendering for `manage.py steward`: short tables and key/value blocks, and
rows as JSON (`show --json`)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def short(value, width: int | None = 60) -> str:
    """One line of at most `width` characters (None: all of it, as `show --full` prints)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()  # noqa: E731
    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    if not rows:
        out.append("(none)")
    return "\n".join(out)


def block(pairs: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.rjust(width)}  {v}" for k, v in pairs)


def record(row, fields: list[str] | None = None) -> dict:
    """A model row as a dict of its columns (foreign keys as their ids: `pool_id`)."""
    names = fields or [f.attname for f in row._meta.concrete_fields]
    return {name: getattr(row, name) for name in names}


def json_text(value) -> str:
    """Whole, indented JSON: ids and times as text, hashes as hex."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=_plain)


def _plain(value):
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()
    raise TypeError(f"{type(value).__name__} is not JSON")
