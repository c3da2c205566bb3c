"""A tool call's path is decoded and checked once (runtime/gateway/paths.py): the hostile
table's paths as the web server hands them over, and generated compositions of bypass
fragments, hold one property. A path is either refused naming a rule, or it becomes one
ToolTarget whose resource (what the grant is matched against) and forwarded URL say the
same path: every way a server behind the gateway might read the forwarded URL lies under
a granted prefix exactly when the resource does."""

from __future__ import annotations

from urllib.parse import unquote, unquote_to_bytes, urlsplit

import pytest
from django.utils.encoding import repercent_broken_unicode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.authz import patterns
from runtime.errors import ToolPathRefused
from runtime.gateway.paths import MAX_PATH, PathRefusal, ToolTarget, tool_target
from tests.runtime.gateway.hostile import GRANTED, HOSTILE, MIXED, UNDER, outside, readings

BASE = "http://tools.example/tool"


def as_served(target: bytes) -> tuple[str, str]:
    """What the view is handed for a request target: the path decoded once by the web
    server and read as UTF-8 by Django, bytes that are not UTF-8 left as %XX
    (django.core.handlers.wsgi.get_path_info), and the query as it came."""
    path, _, query = target.partition(b"?")
    return repercent_broken_unicode(unquote_to_bytes(path)).decode(), query.decode("latin-1")


def outcome(target: bytes):
    path, query = as_served(target)
    try:
        return tool_target("echo", path, query)
    except ToolPathRefused as refused:
        return refused


def forwarded(made: ToolTarget) -> str:
    """The request target the tool receives: the forwarded URL's path and query."""
    parts = urlsplit(made.url(BASE))
    return parts.path + (f"?{parts.query}" if parts.query else "")


def held(made: ToolTarget) -> None:
    """The one-value property of an admitted path."""
    sent = forwarded(made)
    # The forwarded path decoded once, or any number of times, is the path decided on.
    assert unquote(urlsplit(made.url(BASE)).path) == "/tool/" + made.path
    assert unquote(unquote(urlsplit(made.url(BASE)).path)) == "/tool/" + made.path
    # Every server's reading of it is under the grant's prefix exactly when the resource is.
    granted = patterns.covers(GRANTED, made.resource)
    assert (not outside(sent, UNDER)) == granted, (made, sorted(readings(sent)))


@pytest.mark.parametrize("what, target, expected", HOSTILE, ids=[row[0] for row in HOSTILE])
def test_each_hostile_path_is_refused_naming_its_rule_or_forwarded_as_decided(what, target, expected):
    made = outcome(target)
    if expected in set(PathRefusal):
        assert isinstance(made, ToolPathRefused), made
        assert (made.code, made.status, made.details["reason"]) == ("TOOL_PATH_REFUSED", 400, expected)
        assert made.details["boundary"] == "credential_gateway"
        return
    assert isinstance(made, ToolTarget), made
    held(made)
    if expected == "denied":
        assert not patterns.covers(GRANTED, made.resource)
    else:
        assert forwarded(made) == expected
        assert patterns.covers(GRANTED, made.resource)


def test_the_table_covers_every_rule_and_is_at_least_thirty_rows():
    assert len(HOSTILE) >= 30
    assert {expected for _, _, expected in HOSTILE} >= set(PathRefusal) | {"denied"}


def test_a_target_is_made_only_by_tool_target():
    with pytest.raises(TypeError):
        ToolTarget("echo", "read/../write", "")


def test_the_tools_root_and_the_longest_path_are_allowed():
    assert tool_target("echo", "").resource == "tool:echo/"
    longest = tool_target("echo", "read/" + "a" * (MAX_PATH - 5))
    assert patterns.concrete(longest.resource) == longest.resource  # fits a decision's resource


# Generated: any composition of bypass fragments, after `read/`. Deterministic (derandomize),
# so a failure here fails the same way on the next run.
def composed(most: int):
    return st.lists(st.sampled_from(MIXED), min_size=1, max_size=most).map(lambda parts: b"read/" + b"".join(parts))


def _property(target: bytes):
    """Refused with a named reason, or a target held to its grant; which one it was."""
    made = outcome(target)
    if isinstance(made, ToolPathRefused):
        assert made.details["reason"] in set(PathRefusal)
    else:
        held(made)
    return made


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composed(8))
def test_generated_bypasses_are_refused_or_forwarded_as_decided(target):
    assert isinstance(_property(target), (ToolPathRefused, ToolTarget))


@pytest.mark.stress
@settings(max_examples=20_000, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(composed(16))
def test_many_generated_bypasses_are_refused_or_forwarded_as_decided(target):
    assert isinstance(_property(target), (ToolPathRefused, ToolTarget))


@pytest.mark.parametrize("path", ["read/\ufffd", "read/x\udc80"], ids=["replacement character", "lone surrogate"])
def test_what_an_asgi_server_makes_of_bytes_that_are_not_utf8_is_refused(path):
    # An ASGI server decodes the path itself: U+FFFD (or a lone surrogate) where bytes were not UTF-8.
    with pytest.raises(ToolPathRefused) as refused:
        tool_target("echo", path)
    assert refused.value.details["reason"] == "bad_utf8"
