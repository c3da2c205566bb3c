"""Every error the API answers is `{"code", "message", "details"}`, with a stable code.

Runtime refusals (runtime/errors.py) carry their own code and HTTP status; this module
maps what django-ninja and Django raise on their own (a field that does not validate, a
body that is not JSON, a body too large) to the same shape, so a client parses one thing.
Bad input is always a 4xx: the catch-all below is for our own bugs, logged with their
traceback and answered without it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from runtime.errors import StewardError, Unauthenticated

log = logging.getLogger("console.api")

# Codes only the HTTP layer produces (the runtime's are in runtime/errors.py).
INVALID_REQUEST = "INVALID_REQUEST"  # 422: a path, query, header or body field does not validate
MALFORMED_JSON = "MALFORMED_JSON"  # 400: the body is not JSON
BODY_NOT_UTF8 = "BODY_NOT_UTF8"  # 400: the body's bytes are not UTF-8
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"  # 415: a body that is not application/json
BODY_TOO_LARGE = "BODY_TOO_LARGE"  # 413: past DATA_UPLOAD_MAX_MEMORY_SIZE, before it is parsed
NOT_FOUND = "NOT_FOUND"  # 404: a path with no route
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"  # 405: a method the path does not serve
BAD_REQUEST = "BAD_REQUEST"  # 400: a request Django will not read (a query string of over 1,000 fields)
INTERNAL = "INTERNAL"  # 500: a bug of ours; never bad input

# Each code above with its status: what console/api/openapi.py declares for them.
HTTP_STATUS = {
    INVALID_REQUEST: 422,
    MALFORMED_JSON: 400,
    BODY_NOT_UTF8: 400,
    UNSUPPORTED_MEDIA_TYPE: 415,
    BODY_TOO_LARGE: 413,
    NOT_FOUND: 404,
    METHOD_NOT_ALLOWED: 405,
    BAD_REQUEST: 400,
    INTERNAL: 500,
}


class Error(Schema):
    code: str
    message: str
    details: dict[str, Any] = {}


def refuses(*errors: type[StewardError]):
    """Declare the runtime refusals a route may answer, beside the ones the HTTP layer
    adds by the route's shape (console/api/openapi.py: a token, parameters, a body).

    The OpenAPI document lists each status with its codes (the `code` field's enum), so
    a client learns from it what to match on, and schemathesis, the fuzz and every API
    test hold each answer to it (tests/api/conftest.py): a refusal a route gives and
    does not declare fails them."""
    for error in errors:
        if not (isinstance(error, type) and issubclass(error, StewardError)):
            raise TypeError(f"refuses() takes StewardError classes, not {error!r}")

    def declare(view):
        view.refusals = {error.code: error.status for error in errors}
        return view

    return declare


class BodyError(Exception):
    """Why a request body could not be read as JSON; ninja wraps whatever parse_body
    raises into HttpError(400), and the handler below reads this back as its cause."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class JsonParser(Parser):
    """Reads a body only as strict UTF-8 JSON: a latin-1 body is refused for its bytes,
    not parsed as mojibake, and NaN or Infinity (which json.loads accepts) are refused
    because no JSON client sends them and PostgreSQL's jsonb cannot store them."""

    def parse_body(self, request: HttpRequest):
        kind = (request.content_type or "").lower()
        if kind and kind != "application/json" and not kind.endswith("+json"):
            raise BodyError(415, UNSUPPORTED_MEDIA_TYPE, f"send the body as application/json, not {kind[:60]}")
        charset = (request.content_params or {}).get("charset", "utf-8").lower()
        if charset not in ("utf-8", "utf8"):
            raise BodyError(415, UNSUPPORTED_MEDIA_TYPE, f"send the body as UTF-8, not {charset[:40]}")
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(400, BODY_NOT_UTF8, f"the body is not UTF-8 (byte {exc.start})") from None
        try:
            return json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise BodyError(400, MALFORMED_JSON, "the body nests too deeply to parse") from None
        except ValueError as exc:
            raise BodyError(400, MALFORMED_JSON, f"the body is not JSON: {str(exc)[:200]}") from None

    def parse_querydict(self, data, list_fields, request):
        """A parameter given twice is refused, not read as its last value: no scalar
        parameter of this API takes several (`?agent=a&agent=b` means neither). Handed on
        as the list it is, it fails the field's type: INVALID_REQUEST naming the field."""
        return {
            key: data.getlist(key) if key in list_fields or len(data.getlist(key)) > 1 else data[key] for key in data
        }


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def error_response(api: NinjaAPI, request, status: int, code: str, message: str, details=None) -> HttpResponse:
    return api.create_response(request, {"code": code, "message": message, "details": details or {}}, status=status)


def install(api: NinjaAPI) -> None:
    """Register the handlers; the most specific exception class wins (ninja looks them
    up along the exception's MRO)."""

    @api.exception_handler(StewardError)
    def steward_error(request, exc: StewardError):
        return error_response(api, request, exc.status, exc.code, exc.message, _plain(exc.details))

    @api.exception_handler(ValidationError)
    def invalid_request(request, exc: ValidationError):
        fields = [
            {"loc": _where(e.get("loc", ())), "msg": str(e.get("msg", "invalid")), "type": str(e.get("type", ""))}
            for e in exc.errors
        ]
        shown = "; ".join(f"{'.'.join(f['loc'])}: {f['msg']}" for f in fields[:5])
        return error_response(
            api, request, 422, INVALID_REQUEST, f"the request does not validate: {shown}", {"fields": fields}
        )

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request, exc):
        return error_response(
            api, request, 401, Unauthenticated.code, "send an API token: Authorization: Bearer stw_..."
        )

    @api.exception_handler(SuspiciousOperation)
    def unreadable(request, exc: SuspiciousOperation):
        # Django refuses to parse a query string of more than DATA_UPLOAD_MAX_NUMBER_FIELDS
        # fields (TooManyFieldsSent) when ninja first reads request.GET: bad input, not a bug.
        return error_response(api, request, 400, BAD_REQUEST, f"the request cannot be read: {str(exc)[:200]}")

    @api.exception_handler(HttpError)
    def http_error(request, exc: HttpError):
        cause = exc.__cause__
        if isinstance(cause, BodyError):
            return error_response(api, request, cause.status, cause.code, cause.message)
        if isinstance(cause, RequestDataTooBig):
            return too_big(request, cause)
        code = {400: MALFORMED_JSON if "parse" in exc.message else BAD_REQUEST, 404: NOT_FOUND}.get(
            exc.status_code, BAD_REQUEST
        )
        return error_response(api, request, exc.status_code, code, exc.message)

    @api.exception_handler(RequestDataTooBig)
    def too_big(request, exc):
        return error_response(api, request, 413, BODY_TOO_LARGE, "the request body is too large")

    @api.exception_handler(Http404)
    def not_found(request, exc):
        return error_response(api, request, 404, NOT_FOUND, "no such resource")

    @api.exception_handler(Exception)
    def internal(request, exc):
        log.exception("API %s %s failed", request.method, request.path)
        return error_response(api, request, 500, INTERNAL, "internal error; it is logged")


def _where(loc) -> list[str]:
    """A field's location as a client wrote it: ninja puts a body's parameter name after
    "body" (["body", "body", "agent"]), which names our function, not the request."""
    parts = [str(part) for part in loc]
    return [parts[0], *parts[2:]] if parts[:1] == ["body"] and len(parts) >= 2 else parts


def _plain(details: dict) -> dict:
    """Details as JSON (a runtime error may carry a UUID or a datetime)."""
    return json.loads(json.dumps(details, default=str))
