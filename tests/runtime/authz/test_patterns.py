"""Resource patterns are exact values or prefixes, so covering and meeting are one
startswith; a child's requested scope is checked entry by entry."""

from __future__ import annotations

import pytest

from runtime.authz import patterns
from runtime.errors import StewardError


@pytest.mark.parametrize(
    "pattern, value, covered",
    [
        ("*", "anything", True),
        ("repo:acme/*", "repo:acme/docs", True),
        ("repo:acme/*", "repo:acme/*", True),
        ("repo:acme/*", "repo:acme/docs/*", True),
        ("repo:acme/*", "repo:acme", False),
        ("repo:acme/*", "repo:*", False),
        ("repo:acme/docs", "repo:acme/docs", True),
        ("repo:acme/docs", "repo:acme/docs2", False),
        ("repo:acme/docs", "repo:acme/*", False),
    ],
)
def test_a_pattern_covers_what_starts_with_its_prefix_and_an_exact_value_only_itself(pattern, value, covered):
    assert patterns.covers(pattern, value) is covered


@pytest.mark.parametrize(
    "a, b, meet",
    [
        ("repo:*", "repo:acme/*", "repo:acme/*"),
        ("repo:acme/*", "repo:*", "repo:acme/*"),
        ("repo:acme/*", "repo:acme/x", "repo:acme/x"),
        ("repo:acme/*", "repo:globex/*", None),
        ("a", "b", None),
    ],
)
def test_two_patterns_meet_in_the_narrower_or_not_at_all(a, b, meet):
    assert patterns.meet(a, b) == meet


@pytest.mark.parametrize(
    "scope",
    [
        "repo:*",
        [{"action": "tool.search"}],
        [{"action": "tool.search", "resource": "a", "extra": 1}],
        [{"action": "Tool Search", "resource": "a"}],
        [{"action": "tool.search", "resource": "a*b"}],
        [{"action": "tool.search", "resource": "a"}] * 101,
        ["tool.search"],
    ],
)
def test_a_malformed_requested_scope_is_refused(scope):
    with pytest.raises(StewardError):
        patterns.scope(scope)


def test_a_requested_scope_is_a_list_of_actions_on_resources_or_none():
    assert patterns.scope(None) is None
    assert patterns.scope([{"action": "tool.search", "resource": "repo:acme/*"}]) == [
        {"action": "tool.search", "resource": "repo:acme/*"}
    ]
