"""Plain-text rendering for `manage.py steward`: short tables and key/value blocks."""

from __future__ import annotations

import json
from datetime import datetime


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def short(value, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    if not rows:
        out.append("(none)")
    return "\n".join(out)


def block(pairs: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.rjust(width)}  {v}" for k, v in pairs)
