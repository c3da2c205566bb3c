"""The gateway's settings fail loudly at start-up, naming the variable and the tool, and
never echo a key."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from console import env

GOOD = {
    "github": {"url": "https://api.github.com", "key": "ghp-secret", "header": "Authorization"},
    "search": {"url": "http://127.0.0.1:9/x/", "key": "s-secret", "header": "X-Api-Key"},
}


def test_tools_parse_into_url_key_and_header(monkeypatch):
    monkeypatch.setenv("STEWARD_TOOLS", json.dumps(GOOD))
    assert env.gateway_tools("STEWARD_TOOLS") == {
        "github": {"url": "https://api.github.com", "key": "ghp-secret", "header": "Authorization"},
        "search": {"url": "http://127.0.0.1:9/x", "key": "s-secret", "header": "X-Api-Key"},
    }


@pytest.mark.parametrize(
    "value, says",
    [
        ("{not json", "not JSON"),
        ("[]", "JSON object"),
        (json.dumps({"Bad Name": GOOD["github"]}), "lowercase identifiers"),
        (json.dumps({"gh": {**GOOD["github"], "extra": 1}}), "url, key and header only"),
        (json.dumps({"gh": {**GOOD["github"], "url": "ftp://x"}}), "http(s) url"),
        (json.dumps({"gh": {**GOOD["github"], "key": ""}}), "needs a key"),
        (json.dumps({"gh": {**GOOD["github"], "header": "X Bad: ghp-secret"}}), "malformed header"),
    ],
)
def test_malformed_tools_stop_start_up_naming_why_without_the_key(monkeypatch, value, says):
    monkeypatch.setenv("STEWARD_TOOLS", value)
    with pytest.raises(ImproperlyConfigured) as raised:
        env.gateway_tools("STEWARD_TOOLS")
    assert "STEWARD_TOOLS" in str(raised.value) and says in str(raised.value)
    assert "ghp-secret" not in str(raised.value)


@pytest.mark.parametrize("value", ["localhost:8000", "ftp://host", "http://", "not a url"])
def test_a_gateway_or_model_url_that_is_not_http_stops_start_up(monkeypatch, value):
    monkeypatch.setenv("STEWARD_MODEL_URL", value)
    with pytest.raises(ImproperlyConfigured, match="STEWARD_MODEL_URL"):
        env.http_url("STEWARD_MODEL_URL", None)
