"""Every module-level import in the package is the standard library, computefence itself or a
declared dependency, so `pip install .` into a clean venv is enough (click, for one, is no
longer a dependency of typer and must not be imported directly)."""

from __future__ import annotations

import ast
import subprocess
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


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            pins[requirement.name.lower().replace("_", "-")] = str(requirement.specifier)
    return pins


def test_every_runtime_dependency_is_bounded_above():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    unbounded = [
        r for r in project["dependencies"] if not any(s.operator in ("<", "<=", "==") for s in Requirement(r).specifier)
    ]
    assert unbounded == []


def test_constraints_pin_every_declared_package_inside_its_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]
    pins = _constraints()
    for requirement in declared:
        name = requirement.name.lower().replace("_", "-")
        assert pins.get(name, "").startswith("=="), f"{name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name][2:], prereleases=True), (name, pins[name])


def test_importing_the_ssh_connector_prints_no_warning():
    # cryptography 48+ warns about the DSA types asyncssh names at import: five blocks on stderr.
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import computefence.connectors.ssh, computefence.demo.fleet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
