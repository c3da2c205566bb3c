"""Template source checks that no page render would catch by its status alone."""

from __future__ import annotations

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
