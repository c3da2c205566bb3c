"""The Content-Security-Policy (console/csp.py, SECURE_CSP in console/settings.py): the
policy allows no inline script or style and no eval; every answer carries it (console
pages, fragments, the API, /metrics, the admin); and nothing the console writes would be
refused by it: no template under templates/, and no page as rendered, holds an inline
script, a style element or attribute, an event handler attribute, or htmx that evaluates
(hx-on, trigger filters in brackets, js: values). The browser checks the same in Chromium:
tests/e2e/test_csp.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from console.csp import ContentSecurityPolicyMiddleware, policy
from tests.console.test_smoke_pages import pages

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
TAG = re.compile(r"<([a-zA-Z][\w-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>", re.S)
ATTRIBUTE = re.compile(r"""([^\s=/>]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]+))?""")


def refused(html: str) -> list[str]:
    """What in `html` the policy would refuse (or htmx would evaluate, which it forbids)."""
    found = []
    for name_as_written, attributes in TAG.findall(html):
        tag = name_as_written.lower()
        pairs = {name.lower(): value.strip("\"'") for name, value in ATTRIBUTE.findall(attributes)}
        if tag == "style":
            found.append("a <style> element")
        if tag == "script" and "src" not in pairs and pairs.get("type") != "application/json":
            found.append(f"an inline <script{attributes}>")
        for name, value in pairs.items():
            if name == "style":
                found.append(f"a style attribute on <{tag}>: {value[:60]!r}")
            elif re.fullmatch(r"on[a-z]+", name):
                found.append(f"an event handler {name} on <{tag}>")
            elif re.match(r"(data-)?hx-on", name):
                found.append(f"htmx's {name} (evaluated) on <{tag}>")
            elif name in ("hx-trigger", "data-hx-trigger") and "[" in value:
                found.append(f"a trigger filter (evaluated) on <{tag}>: {value!r}")
            elif re.match(r"\s*(js|javascript):", value, re.I):
                found.append(f"script in {name} on <{tag}>: {value[:60]!r}")
    return found


def test_the_policy_allows_only_this_sites_own_files_and_nothing_inline_or_evaluated(settings):
    csp = settings.SECURE_CSP
    for directive in ("default-src", "script-src", "style-src", "connect-src"):
        assert csp[directive] == ["'self'"], directive
    assert csp["img-src"] == ["'self'", "data:"]
    assert (csp["object-src"], csp["base-uri"], csp["frame-ancestors"]) == (["'none'"], ["'none'"], ["'none'"])
    assert csp["form-action"] == ["'self'"]
    text = policy(csp)
    assert "unsafe" not in text and "*" not in text and "http" not in text
    assert text.startswith("default-src 'self'; script-src 'self'; style-src 'self'; ")


@pytest.mark.parametrize("path", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_no_template_holds_what_the_policy_refuses(path):
    assert refused(path.read_text()) == []


def test_the_scan_finds_each_kind_of_inline_code():
    hostile = """<script>alert(1)</script><script type="module">x()</script><style>p{}</style>
    <p style="color:red"><a onclick="x()" href="javascript:x()">x</a><div hx-on:click="x()"></div>
    <div hx-trigger="every 2s [document.visibilityState === 'visible']" hx-vals='js:{a: 1}'></div>
    <SELECT ONCHANGE="this.form.submit()"></SELECT>"""
    assert len(refused(hostile)) == 10, refused(hostile)
    harmless = """<script src="/static/x.js" defer></script><script type="application/json" id="d">{"a": 1}</script>
    <div hx-trigger="every 2s" hx-headers='{"X-CSRFToken": "t"}' data-submit-on-change></div>"""
    assert refused(harmless) == []


def test_every_console_page_as_rendered_carries_the_policy_and_nothing_it_refuses(world, as_person, settings):
    expected = policy(settings.SECURE_CSP)
    client = as_person(world.people.alice)
    for url in [*pages(world), "/members/", "/approvals/", "/grants/", "/schedules/", "/budgets/"]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response["Content-Security-Policy"] == expected, url
        assert refused(response.content.decode()) == [], url


def test_sign_in_the_api_the_admin_metrics_and_a_missing_page_carry_it_too(client, db, settings):
    expected = policy(settings.SECURE_CSP)
    for url, status in (
        ("/login/", 200),
        ("/api/v1/tasks", 401),
        ("/api/v1/docs", 200),
        ("/admin/login/", 200),
        ("/metrics", 200),
        ("/no-such-page/", 404),
    ):
        response = client.get(url)
        assert (response.status_code, response["Content-Security-Policy"]) == (status, expected), url
    for url in ("/login/", "/api/v1/docs", "/admin/login/"):
        html = client.get(url).content.decode()
        assert refused(html) == [] and "cdn" not in html.lower(), url


def test_a_view_that_sets_its_own_policy_keeps_it_and_no_setting_sends_none(settings):
    request = RequestFactory().get("/")

    def own(_request):
        response = HttpResponse("x")
        response["Content-Security-Policy"] = "default-src 'none'"
        return response

    assert ContentSecurityPolicyMiddleware(own)(request)["Content-Security-Policy"] == "default-src 'none'"
    settings.SECURE_CSP = {}
    assert "Content-Security-Policy" not in ContentSecurityPolicyMiddleware(lambda r: HttpResponse("x"))(request)
