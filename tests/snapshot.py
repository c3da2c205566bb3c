"""What every table holds, to show that a refused call wrote nothing anywhere."""

from __future__ import annotations

import pytest
from django.db import connection

from runtime.errors import StewardError

PREFIXES = ("steward_", "auth_", "guardian_", "django_")


def tables() -> list[str]:
    with connection.cursor() as cur:
        cur.execute("SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1")
        return [name for (name,) in cur.fetchall() if name.startswith(PREFIXES)]


def snapshot() -> dict[str, tuple[int, str]]:
    """Each table's row count and a checksum of its rows' text, so an UPDATE shows too."""
    found = {}
    with connection.cursor() as cur:
        for name in tables():
            cur.execute(f'SELECT count(*), md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) '
                        f'FROM "{name}" t')
            found[name] = cur.fetchone()
    assert {"steward_task", "steward_audit", "steward_pool", "steward_slot", "auth_user",
            "guardian_userobjectpermission"} <= found.keys()
    return found


def refused(code: str, call) -> StewardError:
    """Run `call`, which must be refused with `code` and change no table."""
    before = snapshot()
    with pytest.raises(StewardError) as error:
        call()
    assert error.value.code == code, error.value.as_dict()
    assert snapshot() == before
    return error.value
