"""The API's test fixtures: the personas with tokens, and a client that sends one and
holds every answer to what the served OpenAPI document declares for its route."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import pytest
from django.test import Client
from django.urls import Resolver404, resolve

from console.access import Principal, token_create, token_revoke
from console.models import ADMIN, OPERATE, OPERATOR, READ, VIEWER
from tests.people import make_people

ROLES = {"alice": ("acme", OPERATOR), "bob": ("acme", VIEWER), "carol": ("globex", OPERATOR), "dave": ("acme", ADMIN)}


def principal_of(user, *, channel: str = "console") -> Principal:
    tenant, role = ROLES[user.get_username()]
    return Principal(user=user, tenant=tenant, role=role, channel=channel, scope=OPERATE, credential="test:setup")


def make_token(user, *, scope: str = OPERATE, name: str = "t", expires_at=None) -> str:
    return token_create(principal=principal_of(user), name=name, scope=scope, expires_at=expires_at).secret


class Api:
    """Django's test client, speaking JSON, with an API token (or none)."""

    def __init__(self, secret: str | None):
        self.client = Client(raise_request_exception=False)
        self.headers = {"Authorization": f"Bearer {secret}"} if secret else {}

    def call(
        self,
        method: str,
        path: str,
        body=None,
        *,
        raw: bytes | None = None,
        content_type: str = "application/json",
        headers: dict | None = None,
        **query,
    ):
        url = path if path.startswith("/") else f"/api/v1/{path}"
        send = getattr(self.client, method.lower())
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        extra = {**self.headers, **(headers or {})}
        if method.upper() == "GET":
            response = send(url, query or None, headers=extra)
        else:
            response = send(url, data, content_type=content_type, headers=extra)
        assert_declared(method, url, response)
        return response

    def get(self, path, **query):
        return self.call("GET", path, **query)

    def post(self, path, body=None, **kw):
        return self.call("POST", path, {} if body is None and "raw" not in kw else body, **kw)

    def patch(self, path, body=None, **kw):
        return self.call("PATCH", path, body or {}, **kw)

    def delete(self, path, **kw):
        return self.call("DELETE", path, **kw)


@dataclass
class Tokens:
    alice: str  # operator of acme, operate token
    alice_read: str  # the same person, a read token
    bob: str  # viewer of acme: read tokens only
    carol: str  # operator of globex
    dave: str  # admin of acme


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # The personas' passwords are hashed for every test (the database is rolled back);
    # PBKDF2's deliberate cost would be most of these tests' time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def people(db):
    return make_people()


@pytest.fixture
def tokens(people) -> Tokens:
    return Tokens(
        alice=make_token(people.alice),
        alice_read=make_token(people.alice, scope=READ),
        bob=make_token(people.bob, scope=READ),
        carol=make_token(people.carol),
        dave=make_token(people.dave),
    )


@pytest.fixture
def alice(tokens) -> Api:
    return Api(tokens.alice)


@pytest.fixture
def carol(tokens) -> Api:
    return Api(tokens.carol)


@functools.cache
def openapi() -> dict:
    from console.api.api import api

    return api.get_openapi_schema()


def declared(method: str, url: str) -> dict | None:
    """The responses the OpenAPI document declares for the operation `url` reaches (by
    Django's own routing, so /audit/export is not /audit/{event_id}); None for a path no
    operation serves (the 404 and 405 api.py answers around the routes)."""
    try:
        match = resolve(unquote(urlsplit(url).path))
    except Resolver404:
        return None
    path = "/" + match.route.replace("<", "{").replace(">", "}")
    operation = openapi()["paths"].get(path, {}).get(method.lower())
    return None if operation is None else {int(status): answer for status, answer in operation["responses"].items()}


def assert_declared(method: str, url: str, response) -> None:
    """Every answer any API test receives is one its route declares: the status, and for
    a refusal its code among the codes declared for that status. A refusal a route gives
    and does not declare fails whichever test provokes it (console/api/openapi.py)."""
    responses = declared(method, url)
    if responses is None:
        return
    where = f"{method.upper()} {urlsplit(url).path}"
    assert response.status_code in responses, (
        f"{where} answered {response.status_code}, which it does not declare: {response.content[:300]!r}"
    )
    schema = responses[response.status_code].get("content", {}).get("application/json", {}).get("schema", {})
    codes = schema.get("properties", {}).get("code", {}).get("enum")
    if codes is not None:
        code = response.json().get("code")
        assert code in codes, f"{where} answered {response.status_code} {code}; it declares {codes} for that status"


def revoke(user, secret: str) -> None:
    from console.models import ApiToken

    token = ApiToken.objects.get(prefix=secret[:12])
    token_revoke(principal=principal_of(user), token_id=token.id)


def assert_error(response, status: int, code: str | None = None) -> dict:
    """The response is `status` with the error shape (and `code`, if given)."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json()
    assert set(body) == {"code", "message", "details"}, body
    assert isinstance(body["code"], str) and isinstance(body["message"], str) and isinstance(body["details"], dict)
    if code is not None:
        assert body["code"] == code, body
    return body
