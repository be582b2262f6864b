"""bench/capture_gpu.py, the real-GPU capture script, run against the fake driver and torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from computefence.demo import fakes

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "capture_gpu.py"


def test_capture_writes_the_recordings_and_compares_them(tmp_path):
    fakes.write_fake_nvidia_smi(tmp_path / "bin", "h100x8-fabric-manager-stopped")
    fakes.write_fake_torch(tmp_path / "site", "cu124")
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--python", sys.executable, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=200,
    )
    assert done.returncode == 0, done.stderr
    name = "h100-80gb-hbm3x8"
    assert (tmp_path / "out" / f"{name}.xml").read_text() == fakes._recording(
        "nvidia-smi", "h100x8-fabric-manager-stopped.xml"
    )
    assert (tmp_path / "out" / f"{name}.query.csv").read_text() == fakes._recording("nvidia-smi", "h100x8.query.csv")
    lines = done.stdout.splitlines()
    # Error 802 keeps torch from CUDA: no canary, and it says why.
    assert "perf canary not run: torch cannot use CUDA here" in lines
    assert "h100x8.xml: fabric_status" in lines and "h100x8-fabric-manager-stopped.xml: same fields known" in lines
