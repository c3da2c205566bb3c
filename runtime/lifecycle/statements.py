"""The tombstone and count statements, built once per place from the registry.

An exception to "one statement per file in runtime/sql/" (docs/adr/0038-erasure-lifecycle.md):
the statement is the same for every place but for the names the registry gives, and a
file per place and operation would repeat it a dozen times. Only registry constants reach
the text (quoted by roles.quote); every value is a parameter.
"""

from __future__ import annotations

from functools import cache

from runtime import db
from runtime.lifecycle.registry import Place
from runtime.roles import quote


@cache
def tombstone(place: Place) -> str:
    """Erase the payload of every live row of the given tasks (%(tasks)s, a bounded batch),
    keep the row, and return the sha256 of what each row held (erased_hash). The hash is
    computed from the old values: SET's expressions read the row as it was."""
    table, task = quote(place.table), quote(place.task)
    sets = [f"{quote(col)} = {tomb}" for col, tomb in place.payload.items()]
    hashed = ", ".join(f"coalesce(p.{quote(col)}::text, '')" for col in place.payload)
    return (
        f"UPDATE {table} p SET {', '.join(sets)}, erased_at = now(), erased_by = %(by)s, "
        f"erased_hash = sha256(convert_to(concat_ws(E'\\x1f', {hashed}), 'UTF8')) "
        f"WHERE p.{task} = ANY(%(tasks)s::uuid[]) AND p.erased_at IS NULL "
        f"RETURNING p.erased_hash"
    )


@cache
def count(place: Place) -> str:
    """How many live (not yet tombstoned) rows the given tasks have here: the preview."""
    return (
        f"SELECT count(*) FROM {quote(place.table)} p "
        f"WHERE p.{quote(place.task)} = ANY(%(tasks)s::uuid[]) AND p.erased_at IS NULL"
    )


@cache
def due(place: Place) -> str:
    """A batch of a tenant's finished tasks, finished before %(cutoff)s, that still have a
    live row here: what the retention job tombstones next."""
    return (
        "SELECT t.id FROM steward_task t "
        "WHERE t.tenant = %(tenant)s AND t.status = ANY(%(finished)s) AND t.finished_at < %(cutoff)s "
        f"AND EXISTS (SELECT 1 FROM {quote(place.table)} p "
        f"WHERE p.{quote(place.task)} = t.id AND p.erased_at IS NULL) "
        "ORDER BY t.id LIMIT %(batch)s"
    )


@cache
def hashes(place: Place) -> str:
    """The hashes of the rows one erasure tombstoned here (a receipt's check)."""
    return f"SELECT p.erased_hash FROM {quote(place.table)} p WHERE p.erased_by = %(by)s"


# Running them: this module owns the cursors of the statements it builds (no file of
# runtime/sql/ names them, so db.fetchall's readers cannot), and returns typed values.
FINISHED_BEFORE = (
    "SELECT t.id FROM steward_task t WHERE t.tenant = %(tenant)s AND t.status = ANY(%(finished)s) "
    "AND t.finished_at < %(cutoff)s ORDER BY t.id"
)


def run_tombstone(place: Place, *, tasks: list, by: str) -> list[bytes]:
    cur = db.cursor()
    cur.execute(tombstone(place), {"tasks": tasks, "by": by})
    return [bytes(r[0]) for r in cur.fetchall()]


def run_count(place: Place, *, tasks: list) -> int:
    cur = db.cursor()
    cur.execute(count(place), {"tasks": tasks})
    row = cur.fetchone()
    return int(row[0]) if row else 0


def run_due(place: Place, *, tenant: str, finished: list[str], cutoff, batch: int) -> list:
    cur = db.cursor()
    cur.execute(due(place), {"tenant": tenant, "finished": finished, "cutoff": cutoff, "batch": batch})
    return [r[0] for r in cur.fetchall()]


def run_hashes(place: Place, *, by: str) -> list[bytes]:
    cur = db.cursor()
    cur.execute(hashes(place), {"by": by})
    return [bytes(r[0]) for r in cur.fetchall()]


def run_finished_before(*, tenant: str, finished: list[str], cutoff) -> list:
    cur = db.cursor()
    cur.execute(FINISHED_BEFORE, {"tenant": tenant, "finished": finished, "cutoff": cutoff})
    return [r[0] for r in cur.fetchall()]
