"""runtime/ never imports the web side: the import-linter contract in pyproject.toml."""

import subprocess
import sys
from pathlib import Path

from tests.harness import REPO


def test_runtime_never_imports_the_web_side():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "runtime never imports the web side KEPT" in result.stdout
