"""How the modules may depend on one another, checked on their source."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "computefence"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def test_no_cli_module_imports_a_private_name_from_another_module():
    # A private name is its module's own business; a command that needs it needs a public step.
    borrowed = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("computefence"):
                borrowed += [f"{path.name}: {node.module}.{a.name}" for a in node.names if _private(a.name)]
    assert borrowed == []
