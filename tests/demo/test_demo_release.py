"""A report of the simulated demo fleet names made-up RunPod pod ids: fleet release refuses it
(exit 2) before any provider is asked, with or without --yes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("yes", [[], ["--yes"]])
def test_release_refuses_a_demo_report(tmp_path, yes):
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "RUNPOD_API_KEY": "not-a-key"}
    report = tmp_path / "demo.json"
    check = [sys.executable, "-m", "computefence", "fleet", "check", "--demo", "-f", "json", "-o", str(report)]
    assert subprocess.run(check, env=env, capture_output=True, timeout=120).returncode == 1

    done = subprocess.run(
        [sys.executable, "-m", "computefence", "fleet", "release", "--from", str(report), *yes],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2 and done.stdout == ""
    assert "is a report of the simulated demo fleet: its pods are on no provider" in done.stderr
