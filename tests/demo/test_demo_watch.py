"""`computefence fleet watch --demo`: simulated pods, each running a simulated Trainer job under
torchrun (or none), each showing the one failure it carries; the jobs end with the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from computefence.demo.fleet import WATCH_PODS

# The one problem each pod must show, and nothing else.
EXPECTED = {
    "run-healthy": set(),
    "run-no-job": {"run.no-job"},
    "run-gpu-idle": {"run.gpu-idle"},
    "run-plateau": {"run.loss-plateau"},
    "run-nan": {"run.loss-nan"},
    "run-stalled": {"run.stalled"},
    "run-ephemeral": {"run.checkpoint-ephemeral"},
}


def _demo_processes(tmp: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(tmp).encode() in argv:
            found.append(argv.replace(b"\0", b" ").decode(errors="replace"))
    return found


def test_watch_demo_shows_each_simulated_failure_and_leaves_no_job_behind(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp")}

    result = subprocess.run(
        [sys.executable, "-m", "computefence", "fleet", "watch", "--demo", "--once", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1, result.stderr  # NaN and checkpoints on the container disk block
    report = json.loads(result.stdout)
    assert report["kind"] == "watch" and {pod.name for pod in WATCH_PODS} == set(EXPECTED)
    hosts = {h["name"]: h for h in report["hosts"]}
    problems = {
        name: {f["check"] for f in host["findings"] if f["severity"] in ("warn", "block")}
        for name, host in hosts.items()
    }
    assert problems == EXPECTED
    # The healthy run's log as a Transformers 5 Trainer writes it: tqdm redraws, quoted losses read.
    log = hosts["run-healthy"]["facts"]["watch"]["log"]
    assert len(log["losses"]) >= 10 and log["losses"][-1] < log["losses"][0]
    assert log["progress"]["total"] == 2000 and "it/s]" in log["tail"][-1]
    assert _demo_processes(tmp_path) == [] and list((tmp_path / "tmp").iterdir()) == []
