"""The probe is kept as parts and sent as one script: how the parts may be written and joined."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from computefence.connectors import payload
from computefence.probe import PARTS

PARTS_DIR = Path(payload.__file__).parent.parent / "probe"
# The repository's hook flags these in probe files; nothing under computefence/probe/ may match.
NON_STDLIB_IMPORT = re.compile(
    r"^\s*(import|from)\s+(pydantic|typer|rich|yaml|asyncssh|runpod|requests|httpx|computefence)\b", re.MULTILINE
)


def _part_tree(name: str) -> ast.Module:
    return ast.parse((PARTS_DIR / f"{name}.py").read_text(), feature_version=(3, 8))


def _top_level_definitions(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def test_every_part_file_is_listed_once():
    on_disk = {p.stem for p in PARTS_DIR.glob("*.py")} - {"__init__"}
    assert sorted(PARTS) == sorted(on_disk) and len(set(PARTS)) == len(PARTS)
    assert PARTS[0] == "core" and PARTS[-1] == "collectors"


def test_parts_import_only_the_stdlib_and_earlier_parts():
    for index, name in enumerate(PARTS):
        source = (PARTS_DIR / f"{name}.py").read_text()
        assert not NON_STDLIB_IMPORT.search(source), name
        for node in _part_tree(name).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in PARTS[:index], (name, node.module)
                defined = _top_level_definitions(_part_tree(node.module))
                assert {alias.name for alias in node.names} <= defined, (name, node.module)


def test_top_level_names_of_parts_do_not_clash():
    # In the script all parts share one namespace: a second definition would silently win.
    owner: dict[str, str] = {}
    for name in PARTS:
        for defined in _top_level_definitions(_part_tree(name)):
            assert defined not in owner, f"{defined} is defined in both {owner[defined]} and {name}"
            owner[defined] = name


def test_assembled_script_has_no_imports_between_parts():
    tree = ast.parse(payload.probe_source(), feature_version=(3, 8))
    relative = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == []
    for name in PARTS:
        assert f"# ---- computefence/probe/{name}.py\n" in payload.probe_source()


def test_assembled_script_is_byte_identical_across_builds():
    # Two builds in this process, and one in a fresh interpreter with another hash seed.
    first = payload.probe_source.__wrapped__()
    assert payload.probe_source.__wrapped__() == first
    code = "import hashlib; from computefence.connectors.payload import probe_source; print(hashlib.sha256(probe_source().encode()).hexdigest())"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert other.stdout.strip() == hashlib.sha256(first.encode()).hexdigest()


def test_importing_the_dataset_part_registers_no_codec_handler():
    code = (
        "import codecs, computefence.probe.dataset\n"
        "try:\n    codecs.lookup_error('computefence-dataset')\nexcept LookupError:\n    print('none')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "none"
