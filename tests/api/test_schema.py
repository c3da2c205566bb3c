"""The OpenAPI document says everything a route may answer, and only what it may: each
refusal with its codes (console/api/openapi.py), the bounds and forms of its inputs, one
schema per name. The tests here read the document; tests/api/conftest.py holds every
answer of every API test to it, and tests/api/test_fuzz.py every answer schemathesis
provokes."""

from __future__ import annotations

import inspect
import json
import types
import typing

import pytest
from ninja import NinjaAPI, Router, Schema

from console.api.api import api
from console.api.errors import HTTP_STATUS
from console.api.openapi import StewardOpenAPI
from console.api.schemas import Body
from runtime import errors
from tests.api.conftest import assert_declared, openapi

RUNTIME = {
    error.code: error.status
    for error in vars(errors).values()
    if inspect.isclass(error) and issubclass(error, errors.StewardError)
}


def operations():
    for path, item in openapi()["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def refusals(operation) -> dict[int, list[str]]:
    """{status: codes} of the operation's error answers (the health check's 503 is its body)."""
    found = {}
    for status, answer in operation["responses"].items():
        schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
        if "code" in schema.get("properties", {}):
            found[int(status)] = schema["properties"]["code"]["enum"]
    return found


def test_every_refusal_declared_is_a_known_code_under_its_own_status():
    for method, path, operation in operations():
        for status, codes in refusals(operation).items():
            for code in codes:
                assert {**RUNTIME, **HTTP_STATUS}.get(code) == status, (method, path, status, code)


@pytest.mark.parametrize(
    "method,path,expected",
    [
        # A token, parameters and a body: the HTTP layer's refusals, and the route's own.
        (
            "POST",
            "/api/v1/tasks",
            {
                400: ["BODY_NOT_UTF8", "INVALID_IDENTIFIER", "MALFORMED_JSON"],
                401: ["AUTH_REQUIRED"],
                403: ["FORBIDDEN"],
                404: ["UNKNOWN_POOL"],
                409: ["AGENT_STOPPED", "IDEMPOTENCY_CONFLICT", "VERSION_RETIRED"],
                413: ["BODY_TOO_LARGE", "INPUT_TOO_LARGE"],
                415: ["UNSUPPORTED_MEDIA_TYPE"],
                422: [
                    "INPUT_TOO_DEEP",
                    "INVALID_INPUT",
                    "INVALID_REQUEST",
                    "INVALID_STRING",
                    "NUMBER_OUT_OF_RANGE",
                    "UNKNOWN_AGENT",
                ],
                429: ["QUEUE_FULL"],
            },
        ),
        # A query string: Django reads at most 1,000 fields of it; a cursor it never gave.
        (
            "GET",
            "/api/v1/tasks",
            {
                400: ["BAD_REQUEST"],
                401: ["AUTH_REQUIRED"],
                404: ["TASK_NOT_FOUND"],
                422: ["INVALID_INPUT", "INVALID_REQUEST"],
            },
        ),
        # No parameter at all: nothing to validate.
        ("GET", "/api/v1/agents", {401: ["AUTH_REQUIRED"]}),
        # No token.
        ("GET", "/api/v1/health", {}),
        # The first find: a grant's preview answered with a stop preview's schema.
        (
            "GET",
            "/api/v1/grants/{grant_id}/preview",
            {401: ["AUTH_REQUIRED"], 404: ["GRANT_NOT_FOUND"], 422: ["INVALID_REQUEST"]},
        ),
    ],
)
def test_a_route_declares_the_http_layers_refusals_by_its_shape_and_its_own(method, path, expected):
    assert refusals(openapi()["paths"][path][method.lower()]) == expected


def test_the_grant_preview_and_the_stop_preview_are_two_schemas():
    """Both classes were named PreviewOut, and ninja kept one component per name: the
    grant preview was documented as a stop preview, without its `grant`."""
    document = openapi()
    grant = document["paths"]["/api/v1/grants/{grant_id}/preview"]["get"]["responses"][200]
    stop = document["paths"]["/api/v1/tasks/{task_id}/stop-preview"]["get"]["responses"][200]
    schemas = document["components"]["schemas"]

    def properties(answer):
        return set(schemas[answer["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]["properties"])

    assert {"grant", "affected_tasks", "authz_revision"} <= properties(grant)
    assert {"count", "tasks_more", "already_stopping"} <= properties(stop)


def test_two_schemas_of_one_name_are_refused_when_the_document_is_built():
    first, second = Router(), Router()

    class Twin(Schema):
        a: int

    @first.get("/a", response=Twin)
    def a(request):
        return {"a": 1}

    class Twin(Schema):  # the same name, another class: the clash under test
        b: str

    @second.get("/b", response=Twin)
    def b(request):
        return {"b": "x"}

    clashing = NinjaAPI(urls_namespace="twins")
    clashing.add_router("", first)
    clashing.add_router("", second)
    with pytest.raises(ValueError, match="two schemas are named Twin"):
        StewardOpenAPI(clashing, "")


def test_no_bound_is_lost_from_the_document():
    """A bound pydantic cannot fold into JSON Schema is written as its own name ("ge":
    1), which validators ignore: the pool's `max_running >= 1` vanished from the schema
    that way, and schemathesis called 0 valid."""

    def walk(node, where):
        if isinstance(node, dict):
            assert not {"ge", "le", "gt", "lt"} & set(node), where
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(json.loads(json.dumps(openapi(), default=str)), "")


def _classes(annotation):
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [c for arg in typing.get_args(annotation) for c in _classes(arg)]
    return [annotation] if inspect.isclass(annotation) else []


def test_every_request_body_is_a_json_object_by_its_class():
    """Every body schema derives from Body, which refuses a list, a number or a string
    (ninja's Schema reads their attributes and, with every field optional, let
    `[null, null]` pass as an empty PATCH)."""
    bodies = 0
    for bound in api._get_bound_routers():
        for view in bound.path_operations.values():
            for operation in view.operations:
                for model in operation.models:
                    if model.__ninja_param_source__ != "body":
                        continue
                    for field in model.model_fields.values():
                        classes = [c for c in _classes(field.annotation) if c is not type(None)]
                        assert classes and all(issubclass(c, Body) for c in classes), (operation.view_func, classes)
                        bodies += 1
    assert bodies >= 20


class Answer:
    def __init__(self, status: int, body: dict | None = None):
        self.status_code, self._body, self.content = status, body or {}, json.dumps(body or {}).encode()

    def json(self):
        return self._body


@pytest.mark.parametrize(
    "status,code,declared",
    [
        (404, "TASK_NOT_FOUND", True),
        (200, None, True),
        (409, "INVALID_TRANSITION", False),  # no 409 on a task's page
        (404, "EFFECT_NOT_FOUND", False),  # a 404, but not one it gives
        (500, "INTERNAL", False),
    ],
)
def test_an_answer_a_route_does_not_declare_fails_every_api_test_that_gets_it(status, code, declared):
    answer = Answer(status, {"code": code, "message": "", "details": {}} if code else {})
    url = "/api/v1/tasks/0190f4a2-8d1c-7c3e-9f10-2b6a1e7d4c55"
    if declared:
        assert_declared("GET", url, answer)
    else:
        with pytest.raises(AssertionError):
            assert_declared("GET", url, answer)


def test_paths_no_operation_serves_are_left_to_api_py():
    assert_declared("GET", "/api/v1/no/such/route", Answer(404, {"code": "NOT_FOUND"}))
    assert_declared("PUT", "/api/v1/tasks", Answer(405, {"code": "METHOD_NOT_ALLOWED"}))
