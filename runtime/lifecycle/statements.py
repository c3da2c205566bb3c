"""The tombstone and count statements, built once per place from the registry.

An exception to "one statement per file in runtime/sql/" (docs/adr/0038-erasure-lifecycle.md):
the statement is the same for every place but for the names the registry gives, and a
file per place and operation would repeat it a dozen times. Only registry constants reach
the text (quoted by roles.quote); every value is a parameter.
"""

from __future__ import annotations

from functools import cache

from runtime import db
from runtime.lifecycle.registry import Place, SubjectKind
from runtime.roles import quote


def by_tasks(place: Place, kind: SubjectKind) -> bool:
    """Whether a subject of this kind selects the place's rows through tasks (in batches of
    %(tasks)s); otherwise by the place's own tenant (and agent) columns, in one statement."""
    if kind == SubjectKind.AGENT:
        return False
    return not (kind == SubjectKind.TENANT and place.tenant is not None)


def _selected(place: Place, kind: SubjectKind) -> str:
    if kind == SubjectKind.AGENT:
        assert place.tenant is not None and place.agent is not None, place.name
        return f"p.{quote(place.tenant)} = %(tenant)s AND p.{quote(place.agent)} = %(agent)s"
    if not by_tasks(place, kind):
        assert place.tenant is not None
        return f"p.{quote(place.tenant)} = %(tenant)s"
    return f"p.{quote(place.task)} = ANY(%(tasks)s::uuid[])"


def _erase(place: Place) -> str:
    """UPDATE ... SET: the tombstone of each payload column and the erased_* columns. The
    hash is computed from the old values: SET's expressions read the row as it was."""
    sets = [f"{quote(col)} = {tomb}" for col, tomb in place.payload.items()]
    hashed = ", ".join(f"coalesce(p.{quote(col)}::text, '')" for col in place.payload)
    return (
        f"UPDATE {quote(place.table)} p SET {', '.join(sets)}, erased_at = now(), erased_by = %(by)s, "
        f"erased_hash = sha256(convert_to(concat_ws(E'\\x1f', {hashed}), 'UTF8')) "
    )


@cache
def tombstone(place: Place, kind: SubjectKind = SubjectKind.TASK) -> str:
    """Erase the payload of every live row a subject of `kind` selects (the given tasks',
    %(tasks)s, a bounded batch; or the tenant's, or the tenant's agent's), keep the row,
    and return the sha256 of what each row held (erased_hash)."""
    return _erase(place) + f"WHERE {_selected(place, kind)} AND p.erased_at IS NULL RETURNING p.erased_hash"


@cache
def count(place: Place, kind: SubjectKind = SubjectKind.TASK) -> str:
    """How many live (not yet tombstoned) rows the subject selects here: the preview."""
    return f"SELECT count(*) FROM {quote(place.table)} p WHERE {_selected(place, kind)} AND p.erased_at IS NULL"


@cache
def _written_before(place: Place) -> str:
    assert place.written is not None and place.tenant is not None, place.name
    return f"p.{quote(place.tenant)} = %(tenant)s AND p.{quote(place.written)} < %(cutoff)s AND p.erased_at IS NULL"


@cache
def expire(place: Place) -> str:
    """Retention of a place measured from its rows' own time (`written`): tombstone a batch
    of the tenant's live rows written before %(cutoff)s, by key; none left: nothing back."""
    key = ", ".join(quote(c) for c in place.key)
    return (
        _erase(place)
        + f"WHERE ({', '.join('p.' + quote(c) for c in place.key)}) IN (SELECT {key} FROM {quote(place.table)} p "
        f"WHERE {_written_before(place)} ORDER BY {key} LIMIT %(batch)s) AND p.erased_at IS NULL "
        "RETURNING p.erased_hash"
    )


@cache
def expired_count(place: Place) -> str:
    """How many live rows of the tenant were written before %(cutoff)s (retention's preview)."""
    return f"SELECT count(*) FROM {quote(place.table)} p WHERE {_written_before(place)}"


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


def run_tombstone(
    place: Place, *, tasks: list, by: str, kind: SubjectKind = SubjectKind.TASK, tenant: str = "", agent: str = ""
) -> list[bytes]:
    cur = db.cursor()
    cur.execute(tombstone(place, kind), {"tasks": tasks, "by": by, "tenant": tenant, "agent": agent})
    return [bytes(r[0]) for r in cur.fetchall()]


def run_count(
    place: Place, *, tasks: list, kind: SubjectKind = SubjectKind.TASK, tenant: str = "", agent: str = ""
) -> int:
    cur = db.cursor()
    cur.execute(count(place, kind), {"tasks": tasks, "tenant": tenant, "agent": agent})
    row = cur.fetchone()
    return int(row[0]) if row else 0


def run_expire(place: Place, *, tenant: str, cutoff, batch: int, by: str) -> list[bytes]:
    cur = db.cursor()
    cur.execute(expire(place), {"tenant": tenant, "cutoff": cutoff, "batch": batch, "by": by})
    return [bytes(r[0]) for r in cur.fetchall()]


def run_expired_count(place: Place, *, tenant: str, cutoff) -> int:
    cur = db.cursor()
    cur.execute(expired_count(place), {"tenant": tenant, "cutoff": cutoff})
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
