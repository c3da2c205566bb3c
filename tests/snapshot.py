"""What every table holds, to show that a refused call wrote nothing anywhere."""

from __future__ import annotations

from django.db import connection

from runtime.errors import StewardError

PREFIXES = ("steward_", "auth_", "guardian_", "django_", "axes_")


def tables() -> list[str]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1"
        )
        return [name for (name,) in cur.fetchall() if name.startswith(PREFIXES)]


def snapshot() -> dict[str, tuple[int, str]]:
    """Each table's row count and a checksum of its rows' text, so an UPDATE shows too."""
    found = {}
    with connection.cursor() as cur:
        for name in tables():
            cur.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \"{name}\" t"
            )
            found[name] = cur.fetchone()
    assert {
        "steward_task",
        "steward_audit",
        "steward_pool",
        "steward_slot",
        "auth_user",
        "guardian_userobjectpermission",
    } <= found.keys()
    return found


def refusal(call) -> tuple[str | None, list[str]]:
    """Run `call`: the stable code it was refused with (None if it was not refused), and
    the tables it changed all the same. A test asserts `refusal(...) == (CODE, [])`."""
    code, changed, _ = _run(call)
    return code, changed


def refused(code: str, call) -> StewardError:
    """Run `call`, which must be refused with `code` and change no table; the error, for
    a test to look at further."""
    got, changed, error = _run(call)
    assert (got, changed) == (code, []), error.as_dict() if error is not None else None
    return error


def _run(call) -> tuple[str | None, list[str], StewardError | None]:
    before = snapshot()
    try:
        call()
        error = None
    except StewardError as exc:
        error = exc
    after = snapshot()
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    return (error.code if error is not None else None), changed, error
