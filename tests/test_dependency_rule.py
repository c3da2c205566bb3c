"""The dependency rule (docs/architecture.md): the import-linter contracts in pyproject.toml.

runtime never imports the web side; inside runtime each layer imports only those below
it; the web side reaches runtime only through services and selectors, and its API,
gateway and console never import each other.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO

pytestmark = pytest.mark.process  # lint-imports, as `make check` runs it itself

CONTRACTS = [
    "runtime never imports the web side KEPT",
    "runtime layers: the CLI and worker over the idea packages over attempts over the\nroot modules KEPT",
    "the web side calls runtime services and selectors, never its internals KEPT",
    "the API, the gateway and the console are independent of each other KEPT",
]


def test_every_dependency_contract_is_kept():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for contract in CONTRACTS:
        assert contract in result.stdout, contract
