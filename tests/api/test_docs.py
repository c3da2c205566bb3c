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


def _shape(path: str) -> str:
    """A path with its parameters unnamed: the docs say {id} where the schema says {task_id}."""
    return re.sub(r"\{[^}]+\}", "{}", path)


ROUTES = PAGE.split("\n## Routes\n", 1)[1].split("\n## ", 1)[0]  # the guide's own, not the generated table


def test_every_operation_of_the_schema_is_named_in_the_routes_table():
    """docs/api.md said grants had no API route while /grants/{id}/narrow and /revoke
    existed: each operation the served schema has is named in the routes table (or the
    prose under it), `METHOD /path`."""
    from tests.api.conftest import openapi

    named = {(method, _shape(path)) for method, path in re.findall(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`", ROUTES)}
    missing = [
        f"{method.upper()} {path}"
        for path, item in openapi()["paths"].items()
        for method in item
        if (method.upper(), _shape(path.removeprefix("/api/v1"))) not in named
    ]
    assert not missing, f"docs/api.md names no {missing}"


def test_the_table_names_no_route_the_schema_lacks():
    from tests.api.conftest import openapi

    served = {(m.upper(), _shape(p.removeprefix("/api/v1"))) for p, item in openapi()["paths"].items() for m in item}
    rows = [line for line in ROUTES.splitlines() if line.startswith("| `")]
    named = {(m, _shape(p)) for row in rows for m, p in re.findall(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`", row)}
    assert named <= served, named - served


BEGIN = "<!-- refusals: generated from the OpenAPI document by tests/api/test_docs.py; do not edit by hand -->"
END = "<!-- end of the generated refusals -->"


def refusals_by_route() -> str:
    """docs/api.md's table of each route's own refusals (the HTTP layer's follow from the
    route's shape, said once above it), and the runtime's codes no route answers."""
    from tests.api.conftest import openapi
    from tests.api.test_schema import refusals

    layer = set(api_errors.HTTP_STATUS) | {errors.Unauthenticated.code}
    rows, answered = [BEGIN, "| route | its own refusals |", "| --- | --- |"], set()
    for path, item in openapi()["paths"].items():
        for method, operation in item.items():
            own = {status: [c for c in codes if c not in layer] for status, codes in refusals(operation).items()}
            answered |= {code for codes in own.values() for code in codes}
            shown = "; ".join(
                f"{status} " + ", ".join(f"`{c}`" for c in codes) for status, codes in own.items() if codes
            )
            rows.append(f"| `{method.upper()} {path.removeprefix('/api/v1')}` | {shown or '-'} |")
    codes = {e.code for e in vars(errors).values() if inspect.isclass(e) and issubclass(e, errors.StewardError)}
    unanswered = ", ".join(f"`{c}`" for c in sorted(codes - answered - layer))
    rows += ["", f"Codes of runtime/errors.py that no route of `/api/v1/` answers: {unanswered}.", END]
    return "\n".join(rows)


def test_the_refusals_by_route_are_the_schemas():
    """Regenerate the part by pasting what this test prints between its markers."""
    start, end = PAGE.index(BEGIN), PAGE.index(END) + len(END)
    expected = refusals_by_route()
    assert PAGE[start:end] == expected, f"docs/api.md's refusals by route should read:\n\n{expected}\n"


def test_no_row_of_the_error_table_calls_a_code_unanswered_that_a_route_answers():
    """The grants row said "no API route yet" of INVALID_RESOURCE_PATTERN and
    GRANT_NOT_NARROWER, which POST /grants and /grants/{id}/narrow answer."""
    from tests.api.conftest import openapi
    from tests.api.test_schema import refusals

    answered = {
        code
        for item in openapi()["paths"].values()
        for operation in item.values()
        for codes in refusals(operation).values()
        for code in codes
    }
    unanswered_rows = [
        row for row in re.findall(r"^\| \d{3} \| .+$", PAGE, re.M) if re.search(r"no API route|not answered by", row)
    ]
    assert unanswered_rows
    for row in unanswered_rows:
        codes = set(re.findall(r"`([A-Z0-9_]+)`", row.split(" | ")[1]))
        assert not codes & answered, (row, codes & answered)
