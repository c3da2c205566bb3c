"""The OpenAPI document: every answer a route can give, each refusal with its codes.

A route declares the runtime refusals it may answer (console/api/errors.py `refuses`);
the HTTP layer's own follow from the route's shape, by where its handlers apply:

* a token (every route but /health): 401 AUTH_REQUIRED;
* any parameter (path, query, header or body): 422 INVALID_REQUEST;
* a query string: 400 BAD_REQUEST (Django reads no more than 1,000 fields);
* a body: 400 MALFORMED_JSON and BODY_NOT_UTF8, 413 BODY_TOO_LARGE, 415 UNSUPPORTED_MEDIA_TYPE.

Each status's schema is the error shape with `code` an enum of exactly its codes, so
schemathesis (tests/api/test_fuzz.py) and every API test (tests/api/conftest.py) hold
each answer to the route's declaration. 405 and the 404 of a path no route serves are
not answers of an operation (api.py answers them for the paths around the routes).

Schema names are unique: ninja keeps one component per class name, so two classes of
the same name (a grant's preview and a stop's) would silently share one schema; a
second, different definition under a name is refused here, when the document is built.
"""

from __future__ import annotations

from ninja.openapi.schema import OpenAPISchema

from console.api.errors import (
    BAD_REQUEST,
    BODY_NOT_UTF8,
    BODY_TOO_LARGE,
    HTTP_STATUS,
    INVALID_REQUEST,
    MALFORMED_JSON,
    UNSUPPORTED_MEDIA_TYPE,
)
from runtime.errors import Unauthenticated

BODY_CODES = (MALFORMED_JSON, BODY_NOT_UTF8, BODY_TOO_LARGE, UNSUPPORTED_MEDIA_TYPE)


def refusals_of(operation) -> dict[int, set[str]]:
    """Every refusal the operation may answer: {status: {code, ...}}."""
    codes: dict[str, int] = dict(getattr(operation.view_func, "refusals", {}))
    if operation.auth_callbacks:
        codes[Unauthenticated.code] = Unauthenticated.status
    sources = {model.__ninja_param_source__ for model in operation.models}
    if sources:
        codes[INVALID_REQUEST] = HTTP_STATUS[INVALID_REQUEST]
    if "query" in sources:
        codes[BAD_REQUEST] = HTTP_STATUS[BAD_REQUEST]
    if "body" in sources:
        codes.update({code: HTTP_STATUS[code] for code in BODY_CODES})
    by_status: dict[int, set[str]] = {}
    for code, status in codes.items():
        by_status.setdefault(status, set()).add(code)
    return by_status


def error_schema(codes) -> dict:
    return {
        "type": "object",
        "title": "Error",
        "properties": {
            "code": {"type": "string", "enum": sorted(codes), "description": "stable: match on it (docs/api.md)"},
            "message": {"type": "string", "description": "for people; may change"},
            "details": {"type": "object", "description": "what the code needs: fields, ids, states"},
        },
        "required": ["code", "message", "details"],
        "additionalProperties": False,
    }


class StewardOpenAPI(OpenAPISchema):
    def responses(self, operation) -> dict:
        answers = super().responses(operation)
        media = self.api.renderer.media_type
        for status, codes in sorted(refusals_of(operation).items()):
            if status in answers and answers[status].get("content"):
                raise ValueError(f"{operation.view_func.__qualname__} answers {status} with a body of its own")
            answers[status] = {
                "description": " or ".join(sorted(codes)),
                "content": {media: {"schema": error_schema(codes)}},
            }
        return answers

    def add_schema_definitions(self, definitions: dict) -> None:
        for name, schema in definitions.items():
            if name in self.schemas and self.schemas[name] != schema:
                raise ValueError(f"two schemas are named {name}: rename one (ninja would keep only the last)")
        super().add_schema_definitions(definitions)
