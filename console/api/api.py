"""The versioned HTTP API, mounted at /api/v1/ (console/urls.py): OpenAPI at
/api/v1/openapi.json, interactive docs at /api/v1/docs (Swagger UI served from ninja's
own static files, never a CDN: "ninja" is in INSTALLED_APPS). docs/api.md is the guide."""

from __future__ import annotations

from ninja import NinjaAPI

from console.api import agents, audit, effects, errors, health, pools, tasks, tokens
from console.api.auth import BearerToken
from console.api.schemas import Renderer

api = NinjaAPI(
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
for module in (tasks, agents, effects, pools, audit, tokens, health):
    api.add_router("", module.router)
