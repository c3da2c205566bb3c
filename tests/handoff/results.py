"""Write the results table of docs/handoff.md from a run's verdicts.

    python -m tests.handoff.results OUT_DIR [docs/handoff.md]

OUT_DIR holds verdicts.jsonl (tests/handoff/conftest.py record) and the traces. The table
goes between the BEGIN/END markers of the document: one row per fixture and clause, one
column per runtime, each cell the verdict, the trace file and the seed. A clause no run
reached reads "not run"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.handoff.harness import CLAUSES, NOT_RUN, versions

RUNTIMES = ("steward", "dbos")
BEGIN, END = "<!-- handoff results: begin -->", "<!-- handoff results: end -->"


def table(verdicts: list[dict]) -> str:
    cells = {(v["fixture"], v["clause"], v["runtime"]): v for v in verdicts}
    pinned = versions()
    lines = [
        f"Pinned: python {pinned['python']}, steward {str(pinned['steward_commit'])[:12]}, dbos {pinned['dbos']}, "
        f"celery {pinned['celery']}, django {pinned['django']}, psycopg {pinned['psycopg']}.",
        "",
        "| fixture | clause | " + " | ".join(RUNTIMES) + " |",
        "|---|---|" + "---|" * len(RUNTIMES),
    ]
    for fixture, clauses in CLAUSES.items():
        for clause in clauses:
            row = [fixture, f"`{clause}`"]
            for runtime in RUNTIMES:
                v = cells.get((fixture, clause, runtime))
                if v is None:
                    row.append(NOT_RUN)
                else:
                    reason = v["reason"].replace("|", "/")
                    row.append(f"**{v['verdict']}**: {reason} (`{v.get('trace', '?')}`, seed {v.get('seed', '?')})")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    doc = Path(argv[1]) if len(argv) > 1 else Path("docs/handoff.md")
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines() if line.strip()]
    text = doc.read_text() if doc.exists() else f"# Handoff results\n\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    doc.write_text(f"{head}{BEGIN}\n{table(verdicts)}\n{END}{tail}")
    print(f"{doc}: {len(verdicts)} verdicts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
