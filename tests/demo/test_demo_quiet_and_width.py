"""Cron and pipes on the demo fleet: -q with -o prints nothing when all is well, and fleet fix
into a pipe wraps its words at COLUMNS, as fleet check does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _run(tmp_path: Path, *argv: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, "-m", "computefence", *argv], env=env, capture_output=True, text=True, timeout=120
    )


def test_quiet_cron_run_of_a_ready_pod_prints_nothing(tmp_path):
    report = tmp_path / "latest.md"

    result = _run(
        tmp_path, "fleet", "check", "--demo", "--limit", "pod-healthy", "-q", "--format", "markdown", "-o", str(report)
    )

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert "pod-healthy" in report.read_text()


def test_fix_into_a_pipe_wraps_at_columns(tmp_path):
    narrow = _run(tmp_path, "fleet", "fix", "--demo", "--limit", "pod-ephemeral-ckpt", columns="60")
    default = _run(tmp_path, "fleet", "fix", "--demo", "--limit", "pod-ephemeral-ckpt")

    # The reasons wrap at the width (commands and paths are never folded: they are pasted).
    prose = [line for line in narrow.stdout.splitlines() if line.startswith("      ")]
    assert prose and max(map(len, prose)) <= 60, narrow.stdout
    assert max(len(line) for line in default.stdout.splitlines() if "advice only" in line) > 60


def test_the_first_run_shows_no_warning_before_the_report(tmp_path):
    """A fresh user's first command: progress lines and the report, no library's warnings."""
    result = _run(tmp_path, "fleet", "check", "--demo")

    assert result.returncode == 1
    assert result.stdout.startswith("ComputeFence fleet check · 6 pods")
    assert all(line.startswith("computefence: [") for line in result.stderr.splitlines()), result.stderr
