"""docs/architecture.md holds to the code: its tree names only what exists and every
package of runtime/ and console/, and its chain of layers is pyproject.toml's
import-linter layers contract, in order. No database.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
NAMES_END = 25  # the tree's descriptions start in this column; names end before it


def tree_block() -> list[str]:
    text = DOC.read_text()
    section = text[text.index("## The tree") :]
    return re.search(r"^```\n(.*?)^```", section, re.M | re.S).group(1).splitlines()


def tree_paths() -> list[str]:
    """Every path the tree names: a name's folder is the nearest line above it indented less."""
    paths, parents = [], []  # parents: (indent, path) of the enclosing folders
    for line in tree_block():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= NAMES_END - 1:
            continue  # a description carried on to another line
        names = line[:NAMES_END].split()
        assert len(line) < NAMES_END or line[NAMES_END - 1] == " ", f"names end before column {NAMES_END}: {line!r}"
        parents = [(i, p) for i, p in parents if i < indent]
        base = parents[-1][1] if parents else ""
        for name in names:
            paths.append(base + name)
        if len(names) == 1 and names[0].endswith("/"):
            parents.append((indent, base + names[0]))
    return paths


def test_the_tree_is_read():
    paths = tree_paths()
    assert {"runtime/", "runtime/states.py", "runtime/sql/schema/", "console/access/", "tests/"} <= set(paths)


def test_everything_the_tree_names_exists():
    missing = [p for p in tree_paths() if not (REPO / p).exists()]
    assert missing == [], "docs/architecture.md's tree names what is not there"


def test_every_package_of_runtime_and_console_is_in_the_tree():
    named = {p.rstrip("/") for p in tree_paths()}
    packages = {
        str(init.parent.relative_to(REPO))
        for top in ("runtime", "console")
        for init in (REPO / top).glob("*/__init__.py")
    }
    # management/ is named as management/commands/, the CLI it holds.
    named |= {p.rsplit("/", 1)[0] for p in named if p.endswith("/commands")}
    assert sorted(packages - named) == [], "a package docs/architecture.md's tree does not show"


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _doc_chain() -> list[list[str]]:
    """The layers of the chain sentence, top first: each a list of its packages."""
    text = DOC.read_text()
    start = text.index("each layer imports only the layers below it:")
    chain = text[start : text.index("the root modules and `models`", start)]
    layers = [re.findall(r"`(\w+)`", part) for part in chain.split("→")]
    return [layer for layer in layers if layer]


def test_the_layer_chain_is_pyprojects():
    (contract,) = [c for c in _contracts() if c["type"] == "layers"]
    *layers, roots = [re.split(r"\s*[|:]\s*", layer) for layer in contract["layers"]]
    assert [sorted(layer) for layer in _doc_chain()] == [sorted(layer) for layer in layers]
    assert "models" in roots


def test_the_separators_say_which_siblings_may_import_each_other():
    """`|` in both places: the idea packages of one layer are independent siblings."""
    (contract,) = [c for c in _contracts() if c["type"] == "layers"]
    text = DOC.read_text()
    for layer in contract["layers"][:-1]:
        if "|" in layer:
            spelled = " | ".join(f"`{name.strip()}`" for name in layer.split("|"))
            assert spelled in " ".join(text.split()), spelled


def test_the_number_of_contracts_is_the_docs():
    words = {3: "Three", 4: "Four", 5: "Five", 6: "Six"}
    assert f"{words[len(_contracts())]} import-linter contracts" in DOC.read_text()
