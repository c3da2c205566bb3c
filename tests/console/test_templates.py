"""Template source checks that no page render would catch by its status alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEMPLATES = sorted((Path(__file__).resolve().parents[2] / "templates").rglob("*.html"))


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.name))
def test_no_comment_spans_lines(path):
    """Django's {# #} comment ends at its line: one that spans lines is printed on the
    page as text (the dashboard showed one). Longer notes use {% comment %}."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        opened = line.rfind("{#")
        assert opened == -1 or "#}" in line[opened:], f"{path.name}:{number}: {{# without #}} on its line"


# An attribute that takes an address, written with a literal path on this site ("/…", not
# "//host"): every console address is reversed ({% url %}) from console/ui/urls.py and every
# file is {% static %}, so a route's path changes in one place. A query string or a fragment
# follows the reversed path: href="{% url 'ui:tasks' %}?agent=…".
URL_ATTRIBUTE = re.compile(
    r"""\b(href|src|action|formaction|poster|hx-(?:get|post|put|patch|delete|push-url|replace-url)|data-[\w-]+)"""
    r"""\s*=\s*["']/(?!/)"""
)
# Documented exceptions, as "file name: attribute": none.
LITERAL_URLS_ALLOWED: set[str] = set()
URL_TAG = re.compile(r"""\{%\s*url\s+(["'])([^"']+)\1(\|[^\s%]+)?""")


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.name))
def test_no_literal_internal_url(path):
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for match in URL_ATTRIBUTE.finditer(line):
            if f"{path.name}: {match.group(1)}" not in LITERAL_URLS_ALLOWED:
                found.append(f"{path.name}:{number}: {line[match.start() : match.end() + 40]}")
    assert not found, "a literal console URL: use {% url 'ui:name' args %} (or {% static %})\n" + "\n".join(found)


def test_the_check_finds_a_literal_url():
    """The check above, on what it must refuse and what it must let through."""
    refused = ['<a href="/tasks/">', "<form action='/login/'>", '<div hx-get="/live/">', '<img src="/static/x.png">']
    allowed = ["<a href=\"{% url 'ui:tasks' %}?agent=x\">", '<a href="https://example.com/">', '<a href="//cdn/x">']
    assert all(URL_ATTRIBUTE.search(text) for text in refused)
    assert not any(URL_ATTRIBUTE.search(text) for text in allowed)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.name))
def test_every_url_tag_names_a_route(path):
    """A misspelt name fails only when its branch renders: here it fails for every branch.
    A name built with |add: ('ui:task-'|add:action) must start some route's name."""
    names = {name for name, _ in _route_names()}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for match in URL_TAG.finditer(line):
            name, built = match.group(2), match.group(3)
            known = any(n.startswith(name) for n in names) if built else name in names
            assert known, f"{path.name}:{number}: no route is named {name!r}"


def _route_names():
    from django.urls import get_resolver

    for namespace, (_, resolver) in get_resolver().namespace_dict.items():
        for name in resolver.reverse_dict:
            if isinstance(name, str):
                yield f"{namespace}:{name}", resolver
    for name in get_resolver().reverse_dict:
        if isinstance(name, str):
            yield name, None


# The views build their URLs the same way: a redirect or a live/fresh URL names its route
# (redirect("ui:task", id), reverse(...)), never a path spelled out, so renaming a route
# cannot leave a view pointing at the old path.
VIEWS = sorted((Path(__file__).resolve().parents[2] / "console" / "ui").glob("*.py"))
_SCREEN_PATH = re.compile(r"^/[a-z]+/")


def _spelled_paths(source: str) -> list[tuple[int, str]]:
    import ast

    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and _SCREEN_PATH.match(node.value)
    ]


@pytest.mark.parametrize("path", VIEWS, ids=lambda p: p.name)
def test_no_view_spells_out_a_screens_path(path):
    assert _spelled_paths(path.read_text()) == []


def test_the_view_check_finds_a_spelled_path():
    assert _spelled_paths('def f(x):\n    """/tasks/ in a docstring"""\n    return redirect(f"/tasks/{x}/")\n') == [
        (3, "/tasks/")
    ]
    assert _spelled_paths('redirect("ui:task", x)\nreverse("ui:tasks") + "?a=1"\n') == []
