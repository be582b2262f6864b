"""The probe is kept as parts and sent as one script: how the parts may be written and joined."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from computefence.connectors.payload import probe_params
from computefence.models import CheckOptions
from computefence.probe import assemble
from computefence.probe.assemble import PARTS, WATCH_PARTS

# Each probe's parts (assemble.PROBES): fleet check's and fleet watch's.
PROBES = {"check": PARTS, "watch": WATCH_PARTS}

PARTS_DIR = Path(assemble.__file__).parent
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
    # The assembler lives beside the parts but runs on the client: never a part of the script.
    on_disk = {p.stem for p in PARTS_DIR.glob("*.py")} - {"__init__", "assemble"}
    assert sorted(set(PARTS) | set(WATCH_PARTS)) == sorted(on_disk)
    assert len(set(PARTS)) == len(PARTS) and len(set(WATCH_PARTS)) == len(WATCH_PARTS)
    assert PARTS[0] == "core" and PARTS[-1] == "collectors"
    assert WATCH_PARTS[0] == "core" and WATCH_PARTS[-1] == "watch"


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_parts_import_only_the_stdlib_and_earlier_parts(probe):
    parts = PROBES[probe]
    for index, name in enumerate(parts):
        source = (PARTS_DIR / f"{name}.py").read_text()
        assert not NON_STDLIB_IMPORT.search(source), name
        for node in _part_tree(name).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1 and node.module in parts[:index], (name, node.module)
                defined = _top_level_definitions(_part_tree(node.module))
                assert {alias.name for alias in node.names} <= defined, (name, node.module)


def test_the_assembler_imports_only_the_stdlib():
    # It is no part, but it lives beside them and stays as dependency-free as they are.
    tree = ast.parse((PARTS_DIR / "assemble.py").read_text())
    imported = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert {name.split(".")[0] for name in imported} <= sys.stdlib_module_names | {"__future__"}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_top_level_names_of_parts_do_not_clash(probe):
    # In the script all parts share one namespace: a second definition would silently win.
    owner: dict[str, str] = {}
    for name in PROBES[probe]:
        for defined in _top_level_definitions(_part_tree(name)):
            assert defined not in owner, f"{defined} is defined in both {owner[defined]} and {name}"
            owner[defined] = name


@pytest.mark.parametrize("dataset", [None, "/data/train.jsonl"])
def test_assembled_script_has_no_imports_between_parts(dataset):
    parts = assemble.probe_parts(probe_params(CheckOptions(dataset=dataset)))
    source = assemble.probe_source(parts)
    tree = ast.parse(source, feature_version=(3, 8))
    relative = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == []
    for name in PARTS:
        assert (f"# ---- computefence/probe/{name}.py\n" in source) == (name in parts)


def test_assembled_script_is_byte_identical_across_builds():
    # Two builds in this process, and one in a fresh interpreter with another hash seed.
    first = assemble.probe_source.__wrapped__()
    assert assemble.probe_source.__wrapped__() == first
    code = "import hashlib; from computefence.probe.assemble import probe_source; print(hashlib.sha256(probe_source().encode()).hexdigest())"
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


DATASET_PARTS = ("dataset_counts", "dataset_rows", "dataset_arrow", "dataset")


def _part_imports(name: str) -> set[str]:
    return {node.module for node in _part_tree(name).body if isinstance(node, ast.ImportFrom) and node.level}


def test_no_probe_part_is_longer_than_700_lines():
    # #20: the dataset scanner was one part of 1,790 lines, half the probe, shipped to every pod.
    lengths = {name: len((PARTS_DIR / f"{name}.py").read_text().splitlines()) for name in PARTS}
    assert {name: n for name, n in lengths.items() if n > 700} == {}


def test_a_check_without_a_dataset_sends_no_dataset_code():
    without = assemble.probe_payload(probe_params(CheckOptions()))
    with_dataset = assemble.probe_payload(probe_params(CheckOptions(dataset="/data/train.jsonl")))
    for name in DATASET_PARTS:
        assert f"# ---- computefence/probe/{name}.py\n" not in without
        assert f"# ---- computefence/probe/{name}.py\n" in with_dataset
    assert "def _ds_" not in without and "def run_dataset_scan(" in with_dataset
    assert "collect_dataset = None  # part dataset not sent" in without
    assert len(assemble.probe_wire(probe_params(CheckOptions()))) < len(
        assemble.probe_wire(probe_params(CheckOptions(dataset="/data/train.jsonl")))
    )


def test_parts_left_out_are_imported_only_by_the_entry_part_or_parts_sent_with_them():
    # Else a part that is sent would find None for a name it uses (probe_source refuses that).
    assert set(assemble.PART_NEEDS) <= set(PARTS) and PARTS[-1] not in assemble.PART_NEEDS
    for name in PARTS[:-1]:
        for source in _part_imports(name) & set(assemble.PART_NEEDS):
            assert assemble.PART_NEEDS.get(name) is assemble.PART_NEEDS[source], (name, source)


def test_a_script_that_leaves_out_a_part_another_part_uses_is_refused():
    parts = tuple(name for name in PARTS if name != "dataset_counts")
    with pytest.raises(RuntimeError, match="probe part dataset_rows imports from dataset_counts"):
        assemble.probe_source(parts)


# What differs between two runs on the same pod: times taken, and the real disk's free space.
_VARYING = ("duration_s", "probe_duration_s", "free_bytes")


def _steady(value):
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in _VARYING}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


def test_the_script_without_the_dataset_parts_answers_as_the_whole_probe(pod, monkeypatch):
    # Leaving a part out changes nothing but the bytes sent: the same pod, the same facts.
    pod.nvidia("h100x8")
    trimmed = pod.run()
    assert "dataset" not in trimmed.document and "dataset" not in trimmed.document["collectors"]
    monkeypatch.setattr(assemble, "probe_parts", lambda params, parts=PARTS: PARTS)
    assert assemble.probe_payload({}).count("# ---- computefence/probe/") == len(PARTS)
    assert _steady(pod.run().document) == _steady(trimmed.document)
