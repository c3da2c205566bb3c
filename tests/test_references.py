"""Every repository path that the docs, docstrings and comments name exists.

A comment that sends a reader to `runtime/sql/claim.sql` or an ADR is only
useful while that file is there; a rename that forgets one leaves a lie. Markdown links
are checked relative to the page they are on; other paths relative to the repository.
"""
# (For instance docs/adr/0002-postgres-decides.md: this very docstring is checked too.)

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP = ("runtime", "console", "tests", "docs", "templates", "static", ".ci")
# A path into one of the top-level folders, as prose writes it: `runtime/sql/claim.sql`,
# docs/adr/, tests/faults/test_partitions.py. Globs and placeholders are not paths.
PATH = re.compile(r"(?<![\w./-])(?:{})/[\w./-]*[\w/]".format("|".join(re.escape(t) for t in TOP)))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# Bare names of files the project used to have, or keeps outside the repository.
BARE = re.compile(r"\b(CONTRACTS|CONVENTIONS|ENVIRONMENT|CONSOLE)\.md\b")
SKIP = ("runtime/migrations/",)  # frozen history: what a migration said when it ran


def tracked() -> list[Path]:
    out = subprocess.run(
        [
            "git",
            "ls-files",
            "-co",
            "--exclude-standard",
            "*.py",
            "*.md",
            "*.sql",
            "*.html",
            "Makefile",
            ".ci/run",
            "pyproject.toml",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [REPO / name for name in out if not name.startswith(SKIP) and (REPO / name).exists()]


def named_paths(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    found = [p.rstrip(".") for p in PATH.findall(text)]
    found = [p for p in found if not any(mark in p for mark in ("<", "*", "{", "..."))]
    return found


# One test per rule over every file, each naming every offender: a test id per file made
# 1,046 tests of these three rules, a third of the suite's ids for a second of reading.
def offenders(paths: list[Path], check) -> dict[str, list[str]]:
    found = {str(path.relative_to(REPO)): check(path) for path in paths}
    return {name: missing for name, missing in found.items() if missing}


def test_every_path_a_file_names_exists():
    # A Django template name ("console/task.html") is a path under templates/.
    def missing(path):
        return [p for p in named_paths(path) if not (REPO / p).exists() and not (REPO / "templates" / p).exists()]

    assert offenders(tracked(), missing) == {}


def test_every_link_on_a_page_leads_somewhere():
    def missing(path):
        text = path.read_text()
        links = [link for link in LINK.findall(text) if "://" not in link and not link.startswith("mailto:")]
        return [link for link in links if not (path.parent / link).exists()]

    assert offenders([p for p in tracked() if p.suffix == ".md"], missing) == {}


def test_no_file_names_a_document_outside_the_repository():
    # docs/contracts.md is the repository's copy of the contracts; name it.
    assert offenders(tracked(), lambda path: BARE.findall(path.read_text(errors="replace"))) == {}
