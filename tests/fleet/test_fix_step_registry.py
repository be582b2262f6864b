"""Every check that can emit a safe pod step has a proof on the real-sshd fleet
(tests/fleet/test_fleet_fix.py PROOFS): its fault on a pod, `fleet fix --apply --yes`, the
finding gone after the re-probe, and the steps run again changing no byte.

Which checks can emit one is read from the evaluator's source: a check id written in a
function from which a FixStep.safe(...) (or persist_env) is reachable through the evaluator's
own functions. That over-counts rather than misses: a function that names two checks counts
for both."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from test_fleet_fix import PROOFS, PROVEN_APART

import computefence.evaluate as evaluate
from computefence.evaluate.checks import watch_checks

SOURCES = sorted(Path(evaluate.__file__).parent.rglob("*.py"))
SAFE_MAKERS = {"persist_env"}


def _functions() -> tuple[dict[str, list[ast.FunctionDef]], dict[str, str]]:
    """Every function by name, and module-level names bound to a check id (REQUIREMENT = "policy.requirement")."""
    found: dict[str, list[ast.FunctionDef]] = {}
    names: dict[str, str] = {}
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                found.setdefault(node.name, []).append(node)
        for node in tree.body:
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                # NAME = "id", and NAME, OTHER = "id", "other"
                pairs = (
                    zip(target.elts, node.value.elts)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                for name, value in pairs:
                    if (
                        isinstance(name, ast.Name)
                        and isinstance(value, ast.Constant)
                        and value.value in evaluate.CHECK_IDS
                    ):
                        names[name.id] = value.value
    return found, names


FUNCTIONS, CHECK_NAMES = _functions()


def _called(node: ast.AST) -> set[str]:
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            if isinstance(call.func, ast.Name):
                names.add(call.func.id)
            elif isinstance(call.func, ast.Attribute):
                names.add(call.func.attr)
    return names


def _makes_safe(node: ast.AST) -> bool:
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "safe" and getattr(func.value, "id", None) == "FixStep":
            return True
        if isinstance(func, ast.Name) and func.id in SAFE_MAKERS:
            return True
    return False


@cache
def _reaches_safe(name: str, seen: frozenset[str] = frozenset()) -> bool:
    for node in FUNCTIONS.get(name, []):
        if _makes_safe(node):
            return True
        for called in _called(node) - seen - {name}:
            if called in FUNCTIONS and _reaches_safe(called, seen | {name}):
                return True
    return False


# fleet watch's run.* checks judge a running job from the watch probe: fleet fix never sees them.
WATCH_ONLY = set(watch_checks.CHECKS)


def checks_with_safe_steps() -> set[str]:
    """Checks fleet fix acts on that can emit a safe pod step."""
    found = set()
    for name, nodes in FUNCTIONS.items():
        if not _reaches_safe(name):
            continue
        for node in nodes:
            for leaf in ast.walk(node):
                if isinstance(leaf, ast.Constant) and leaf.value in evaluate.CHECK_IDS:
                    found.add(leaf.value)
                elif isinstance(leaf, ast.Name) and leaf.id in CHECK_NAMES:
                    found.add(CHECK_NAMES[leaf.id])
    return found - WATCH_ONLY


def test_the_source_scan_finds_the_safe_fixes_it_must():
    # Known safe fixes in three shapes: a direct FixStep.safe, persist_env, and through torch_builds.
    assert {"system.shm", "storage.hf-cache", "gpu.torch-cpu-build"} <= checks_with_safe_steps()


# Checks whose safe steps are the same pip installs proven for policy.requirement and the torch
# checks, but whose fault needs more than one pod or a baseline lock: not yet proven on their own.
NOT_YET_PROVEN: dict[str, str] = {}
PROVEN = set(PROOFS) | set(PROVEN_APART)


def test_every_check_with_a_safe_step_has_a_proof():
    missing = checks_with_safe_steps() - PROVEN - set(NOT_YET_PROVEN)
    assert not missing, f"checks that can emit a safe pod step without a proof in test_fleet_fix.py: {sorted(missing)}"


def test_every_proof_and_every_gap_is_for_a_check_that_has_a_safe_step():
    assert checks_with_safe_steps() >= PROVEN
    assert set(NOT_YET_PROVEN) <= checks_with_safe_steps() - PROVEN
