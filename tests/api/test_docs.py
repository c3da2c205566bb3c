"""docs/api.md's table of error codes names every code the API can answer, with its status."""

from __future__ import annotations

import inspect
import re

from console.api import errors as api_errors
from runtime import errors
from tests.harness import REPO

PAGE = (REPO / "docs" / "api.md").read_text()
ROWS = {
    code: int(status)
    for status, codes in re.findall(r"^\| (\d{3}) \| (.+?) \|", PAGE, re.M)
    for code in re.findall(r"`([A-Z0-9_]+)`", codes)
}


def test_every_runtime_error_code_is_in_the_table_with_its_status():
    for error in vars(errors).values():
        if inspect.isclass(error) and issubclass(error, errors.StewardError):
            assert ROWS.get(error.code) == error.status, (error.code, error.status, ROWS.get(error.code))


def test_every_code_the_http_layer_adds_is_in_the_table():
    codes = {value for name, value in vars(api_errors).items() if name.isupper() and isinstance(value, str)}
    assert codes and codes <= set(ROWS), codes - set(ROWS)
