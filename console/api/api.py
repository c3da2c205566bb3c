"""The versioned HTTP API, mounted at /api/v1/ (console/urls.py): OpenAPI at
/api/v1/openapi.json, interactive docs at /api/v1/docs (Swagger UI served from ninja's
own static files, never a CDN: "ninja" is in INSTALLED_APPS). docs/api.md is the guide."""

from __future__ import annotations

import functools

from django.http import HttpResponseNotAllowed, JsonResponse
from django.urls import re_path
from ninja import NinjaAPI

from console.api import (
    agents,
    approvals,
    audit,
    budgets,
    effects,
    errors,
    grants,
    health,
    lifecycle,
    members,
    memory,
    pools,
    stops,
    tasks,
    tokens,
    triggers,
)
from console.api.auth import BearerToken
from console.api.openapi import StewardOpenAPI
from console.api.schemas import Renderer


class StewardAPI(NinjaAPI):
    """NinjaAPI whose every answer under /api/v1/ has the error shape: ninja answers a
    method a path lacks with a plain-text 405, and Django a path with no route with an
    HTML 404, both outside ninja's exception handlers."""

    @property
    def urls(self):
        patterns, app_name, namespace = super().urls
        for pattern in patterns:
            pattern.callback = _json_405(pattern.callback)
        return [*patterns, re_path(r"^.*$", _no_route)], app_name, namespace

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        """Every route's refusals, each status with its codes (console/api/openapi.py)."""
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        return StewardOpenAPI(self, path_prefix)


def _json_405(view):
    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            response = JsonResponse(
                {
                    "code": errors.METHOD_NOT_ALLOWED,
                    "message": f"{request.method} is not one of {allowed} here",
                    "details": {"allowed": allowed.split(", ")},
                },
                status=405,
            )
            response["Allow"] = allowed
        return response

    return wrapped


def _no_route(request):
    return JsonResponse(
        {"code": errors.NOT_FOUND, "message": f"no route {request.path[:200]}", "details": {}}, status=404
    )


api = StewardAPI(
    title="Steward API",
    version="1",
    description="Trigger and steer durable agent tasks, reconcile effects, review and verify the audit "
    "trail. Every error is {code, message, details}; see docs/api.md.",
    urls_namespace="api",
    auth=BearerToken(),
    parser=errors.JsonParser(),
    renderer=Renderer(),
)
errors.install(api)
for module in (
    tasks,
    stops,
    agents,
    effects,
    approvals,
    pools,
    budgets,
    lifecycle,
    audit,
    tokens,
    members,
    memory,
    grants,
    health,
    triggers,
):
    api.add_router("", module.router)
