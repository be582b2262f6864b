"""What every run of the probe promises: old Pythons, stdlib only, no writes, one valid document."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from probe_pod import PYTHON38, path_fact

from computefence.demo import fakes
from computefence.probe import packages
from computefence.probe import torch as torch_part
from computefence.probe.assemble import probe_source

STDLIB = sys.stdlib_module_names


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _optional_imports(tree: ast.AST) -> set[str]:
    """Imports inside `try:` blocks that handle ImportError: used when present, never required."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if caught & {"ImportError", "ModuleNotFoundError"}:
                for statement in node.body:
                    names |= _imports(statement)
    return names


def test_probe_is_python38_stdlib_only():
    tree = ast.parse(probe_source(), feature_version=(3, 8))
    imported = _imports(tree)
    optional = _optional_imports(tree)
    assert imported - optional - STDLIB == set()
    # The dataset scan reads Parquet when the pod happens to have pyarrow; nothing else is optional.
    assert optional - STDLIB <= {"pyarrow"}
    assert {"json", "subprocess", "threading"} <= imported


def test_embedded_scripts_and_fakes_are_python38_stdlib_only(tmp_path):
    # The packages/torch scripts run in the training interpreter; the fakes run on test pods.
    sources = [packages._PACKAGES_SCRIPT, torch_part._TORCH_SCRIPT]
    fakes.write_fake_nvidia_smi(tmp_path / "bin", "h100x1")
    sources.append((tmp_path / "bin" / "nvidia-smi").read_text())
    fakes.write_fake_torch(tmp_path / "site", "cu124")
    sources += [p.read_text() for p in (tmp_path / "site" / "torch").rglob("*.py")]
    for source in sources:
        tree = ast.parse(source, feature_version=(3, 6) if source in sources[:2] else (3, 8))
        assert _imports(tree) - STDLIB - {"torch", "importlib_metadata", "pkg_resources"} == set()


@pytest.mark.skipif(PYTHON38 is None, reason="python3.8 is not installed")
def test_runs_under_python38_with_fakes(pod):
    moved = pod.mountinfo("runpod-network-volume", {"/workspace": "workspace"})
    pod.nvidia("a100x2")
    pod.torch("cu124")
    run = pod.run(interpreter=PYTHON38, python=PYTHON38, output_dir=str(moved["/workspace"] / "out"))
    facts = run.facts
    assert facts.identity.python_version.startswith("3.8.")
    assert all(status.ok for status in facts.collectors.values()), facts.collectors
    assert len(facts.gpu.gpus) == 2 and facts.torch.device_count == 2
    assert facts.torch.python_version.startswith("3.8.") and facts.packages.versions["torch"] == "2.5.1+cu124"
    assert path_fact(facts, "output_dir").fs_type == "fuse.mfs"


def _snapshot(*roots: Path) -> dict[str, tuple]:
    state = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                info = os.lstat(path)
                state[path] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return state


def test_probe_writes_nothing(pod):
    moved = pod.mountinfo("runpod-network-volume", {"/workspace": "workspace"})
    pod.nvidia("h100x1")
    pod.torch("cu124")
    config = pod.home / ".cache" / "huggingface" / "accelerate" / "default_config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("num_processes: 1\n")
    before = _snapshot(pod.root)
    facts = pod.run(output_dir="out", extra_paths=[str(moved["/workspace"] / "new")]).facts
    assert facts.torch.importable and facts.accelerate.found
    assert _snapshot(pod.root) == before  # no __pycache__ next to torch, no output dir, nothing


def test_hostile_params_travel_inside_the_script(pod):
    weird = 'out\'; touch /tmp/pwned; echo "$(id)"\n`x`'
    facts = pod.run(output_dir=weird).facts
    out = path_fact(facts, "output_dir")
    assert out.path == weird and out.resolved == os.path.normpath(str(pod.cwd / weird))
    assert not Path("/tmp/pwned").exists()


def test_garbage_params_fall_back_to_defaults(pod):
    run = pod.run(deadline_s="soon", timeouts={"gpu": "never", "storage": None}, extra_paths="/single")
    assert run.facts.collectors["gpu"].ok and run.facts.collectors["storage"].ok
    assert path_fact(run.facts, "extra").path == "/single"


def test_whole_probe_respects_its_deadline(pod):
    pod.nvidia("hang")
    pod.torch("hang-on-import")
    run = pod.run(deadline_s=2.0)
    assert run.elapsed < 4.0, run.elapsed
    assert run.facts.gpu.timed_out and run.facts.torch.timed_out
    assert run.facts.collectors["storage"].ok and run.facts.identity.hostname


def test_broken_system_files_leave_identity_partial(pod):
    (pod.etc / "os-release").unlink()
    (pod.proc / "meminfo").write_text("garbage")
    run = pod.run()
    assert run.facts.collectors["identity"].ok and run.facts.identity.mem_total_bytes is None
    assert run.facts.identity.os_release.id is None


def test_probe_source_runs_as_a_script(tmp_path):
    # `computefence probe --print > probe.py; python3 probe.py` works with no parameters at all.
    script = tmp_path / "probe.py"
    script.write_text(probe_source())
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    from computefence.connectors.payload import parse_probe_output

    facts = parse_probe_output(done.stdout)
    assert facts.storage.mounts and facts.identity.cwd == str(tmp_path)
