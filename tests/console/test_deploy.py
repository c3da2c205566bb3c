"""Production settings (console/settings.py, docs/deploy.md section 3): the environment
docs/deploy.md documents, taken from the page itself, passes `manage.py check --deploy
--fail-level WARNING` and serves what it promises (HTTPS redirect behind the proxy, HSTS,
Secure cookies, /metrics exempt from the redirect); a default left unanswered still
warns; a malformed value stops start-up naming its variable."""

from __future__ import annotations

import json
import os
import re
import runpy
import secrets
import subprocess
import sys
from ipaddress import ip_network

import pytest
from django.core.exceptions import ImproperlyConfigured

from console import env
from tests.harness import REPO

DEPLOY = REPO / "docs" / "deploy.md"
SETTINGS = REPO / "console" / "settings.py"
BLOCK = "# production environment of the web tier"
# The variables this hardening added or changed: docs/deploy.md names each.
VARIABLES = [
    "STEWARD_PROXY_SSL_HEADER",
    "STEWARD_SSL_REDIRECT",
    "STEWARD_HSTS_SECONDS",
    "STEWARD_HSTS_INCLUDE_SUBDOMAINS",
    "STEWARD_HSTS_PRELOAD",
    "STEWARD_CSRF_TRUSTED_ORIGINS",
    "STEWARD_ALLOWED_HOSTS",
    "STEWARD_METRICS_TOKEN",
    "STEWARD_METRICS_ALLOW",
    "STEWARD_TRUSTED_PROXIES",
]


def documented() -> dict[str, str]:
    """The lines of the documented environment, each `<placeholder>` a fresh secret."""
    text = DEPLOY.read_text()
    assert text.count(BLOCK) == 1, f"docs/deploy.md has lost its {BLOCK!r} block"
    block = text.split(BLOCK, 1)[1].split("```", 1)[0]
    found = {}
    for line in block.strip().splitlines():
        name, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"STEWARD_[A-Z_]+", name), line
        found[name] = secrets.token_urlsafe(50) if value.startswith("<") else value
    return found


def manage(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """manage.py with only `environment` of the STEWARD_ variables (none of the tests' own)."""
    # Nor DJANGO_ALLOW_ASYNC_UNSAFE, which tests/e2e/conftest.py sets for Playwright's
    # event loop when it is loaded in the same session: a deployment never sets it, and
    # check --deploy reports it (async.E001).
    base = {k: v for k, v in os.environ.items() if not k.startswith("STEWARD_") and k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env={**base, **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_variable_this_hardening_reads_is_in_docs_deploy():
    page = DEPLOY.read_text()
    assert [name for name in VARIABLES if f"`{name}`" not in page] == []
    source = SETTINGS.read_text()
    assert [name for name in VARIABLES if name not in source and name != "STEWARD_ALLOWED_HOSTS"] == []


def test_check_deploy_passes_with_the_documented_production_environment():
    environment = documented()
    assert environment["STEWARD_DEBUG"] == "0"
    done = manage(environment, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_a_default_left_undecided_still_warns():
    """HSTS preload is off by default, and check --deploy asks about it until someone
    says so; the documented environment answers it with an explicit 0."""
    environment = documented()
    del environment["STEWARD_HSTS_PRELOAD"]
    done = manage(environment, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 1 and "security.W021" in done.stderr, done.stdout + done.stderr


SERVED = """
import json
from django.conf import settings
from django.test import Client

host = {"HTTP_HOST": "steward.example.com"}
client = Client()
plain = client.get("/login/", **host)
https = client.get("/login/", HTTP_X_FORWARDED_PROTO="https", **host)
metrics = client.get("/metrics", REMOTE_ADDR="203.0.113.9", **host)
print(json.dumps({
    "plain": [plain.status_code, plain.get("Location")],
    "https": [https.status_code, https.get("Strict-Transport-Security"), https.cookies["csrftoken"]["secure"]],
    "csp": https.get("Content-Security-Policy"),
    "metrics": metrics.status_code,
    "session_secure": settings.SESSION_COOKIE_SECURE,
    "proxy_header": settings.SECURE_PROXY_SSL_HEADER,
    "origins": settings.CSRF_TRUSTED_ORIGINS,
}))
"""


def test_the_documented_environment_redirects_to_https_sends_hsts_and_secure_cookies():
    done = manage(documented(), "shell", "-c", SERVED)
    assert done.returncode == 0, done.stderr
    served = json.loads(done.stdout.strip().splitlines()[-1])
    assert served["plain"] == [301, "https://steward.example.com/login/"]
    assert served["https"] == [200, "max-age=31536000; includeSubDomains", True]
    assert served["csp"].startswith("default-src 'self'; script-src 'self'; style-src 'self'")
    assert served["metrics"] == 403  # not redirected: refused over plain HTTP, as it would be over HTTPS
    assert served["session_secure"] is True
    assert served["proxy_header"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert served["origins"] == ["https://steward.example.com"]


def load_settings(monkeypatch, **variables) -> dict:
    """console/settings.py run afresh with these variables (over production's)."""
    for name in [n for n in os.environ if n.startswith("STEWARD_")]:
        monkeypatch.delenv(name)
    for name, value in {"STEWARD_DEBUG": "0", "STEWARD_SECRET_KEY": "k" * 60, **variables}.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))


MALFORMED = [
    ("STEWARD_PROXY_SSL_HEADER", "X Forwarded Proto"),
    ("STEWARD_PROXY_SSL_HEADER", "X-Forwarded-Proto="),
    ("STEWARD_PROXY_SSL_HEADER", "X-Forwarded-Proto=https please"),
    ("STEWARD_SSL_REDIRECT", "maybe"),
    ("STEWARD_HSTS_SECONDS", "1y"),
    ("STEWARD_HSTS_SECONDS", "-1"),
    ("STEWARD_HSTS_INCLUDE_SUBDOMAINS", "2"),
    ("STEWARD_HSTS_PRELOAD", "yes please"),
    ("STEWARD_CSRF_TRUSTED_ORIGINS", "steward.example.com"),
    ("STEWARD_CSRF_TRUSTED_ORIGINS", "https://steward.example.com/"),
    ("STEWARD_CSRF_TRUSTED_ORIGINS", "https://steward.example.com/console"),
    ("STEWARD_CSRF_TRUSTED_ORIGINS", "ftp://steward.example.com"),
    ("STEWARD_METRICS_ALLOW", "localhost"),
    ("STEWARD_METRICS_ALLOW", "10.0.0.0/33"),
    ("STEWARD_METRICS_ALLOW", "127.0.0.1;::1"),
    ("STEWARD_TRUSTED_PROXIES", "proxy.internal"),
]


@pytest.mark.parametrize(("name", "value"), MALFORMED, ids=[f"{n}={v}" for n, v in MALFORMED])
def test_a_malformed_value_stops_start_up_naming_its_variable(monkeypatch, name, value):
    with pytest.raises(ImproperlyConfigured, match=name):
        load_settings(monkeypatch, **{name: value})


def test_production_defaults_and_what_each_variable_turns(monkeypatch):
    default = load_settings(monkeypatch)
    assert (default["SECURE_SSL_REDIRECT"], default["SECURE_HSTS_SECONDS"]) == (True, 31_536_000)
    assert (default["SECURE_HSTS_INCLUDE_SUBDOMAINS"], default["SECURE_HSTS_PRELOAD"]) == (False, False)
    assert (default["SESSION_COOKIE_SECURE"], default["CSRF_COOKIE_SECURE"]) == (True, True)
    assert default["SECURE_PROXY_SSL_HEADER"] is None  # no header is believed unless named
    assert default["SILENCED_SYSTEM_CHECKS"] == ["axes.W002"]  # axes' middleware, as its subclass
    assert default["STEWARD_METRICS_ALLOW"] == [ip_network("127.0.0.0/8"), ip_network("::1")]
    assert default["STEWARD_TRUSTED_PROXIES"] == []

    chosen = load_settings(
        monkeypatch,
        STEWARD_PROXY_SSL_HEADER="X-Forwarded-Ssl=on",
        STEWARD_SSL_REDIRECT="0",
        STEWARD_HSTS_SECONDS="0",
        STEWARD_HSTS_INCLUDE_SUBDOMAINS="off",
        STEWARD_HSTS_PRELOAD="false",
        STEWARD_CSRF_TRUSTED_ORIGINS="https://steward.example.com, https://ops.example.com:8443",
        STEWARD_METRICS_ALLOW="",
        STEWARD_TRUSTED_PROXIES="10.1.2.3/8, fd00::1",
    )
    assert chosen["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_SSL", "on")
    assert (chosen["SECURE_SSL_REDIRECT"], chosen["SECURE_HSTS_SECONDS"]) == (False, 0)
    assert chosen["CSRF_TRUSTED_ORIGINS"] == ["https://steward.example.com", "https://ops.example.com:8443"]
    assert chosen["STEWARD_METRICS_ALLOW"] == []  # the token only
    assert chosen["STEWARD_TRUSTED_PROXIES"] == [ip_network("10.0.0.0/8"), ip_network("fd00::1")]
    # Each turned off on purpose: check --deploy no longer asks.
    assert sorted(chosen["SILENCED_SYSTEM_CHECKS"]) == [
        "axes.W002",
        "security.W004",
        "security.W005",
        "security.W008",
        "security.W021",
    ]

    debug = load_settings(monkeypatch, STEWARD_DEBUG="1")
    assert (debug["SECURE_SSL_REDIRECT"], debug["SECURE_HSTS_SECONDS"], debug["SESSION_COOKIE_SECURE"]) == (
        False,
        0,
        False,
    )
    assert env.chosen_off("STEWARD_NOT_SET_ANYWHERE") is False
