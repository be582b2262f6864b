"""Every module-level import in the package is the standard library, computefence itself or a
declared dependency, so `pip install .` into a clean venv is enough (click, for one, is no
longer a dependency of typer and must not be imported directly)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
# Distribution name -> the module it installs, where they differ.
MODULE_OF = {"pyyaml": "yaml"}


def _declared_modules() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {Requirement(r).name.lower() for r in project["dependencies"]}
    return {MODULE_OF.get(n, n.replace("-", "_")) for n in names}


def _module_level_imports(tree: ast.Module) -> set[str]:
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_module_level_imports_are_stdlib_or_declared_dependencies():
    allowed = set(sys.stdlib_module_names) | _declared_modules() | {"computefence"}
    undeclared = {}
    for path in sorted((ROOT / "computefence").rglob("*.py")):
        extra = _module_level_imports(ast.parse(path.read_text())) - allowed
        if extra:
            undeclared[str(path.relative_to(ROOT))] = sorted(extra)
    assert undeclared == {}


def test_the_check_sees_a_direct_click_import():
    assert _module_level_imports(ast.parse("import click\nimport typer\n")) - _declared_modules() == {"click"}
