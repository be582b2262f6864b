"""The terminal and markdown reports carry what the HTML page has: each --perf figure beside
its GPU model's median, and (markdown) the pods to give back with their $/h."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def saved_perf_report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("perf")
    report = folder / "fleet.json"
    env = {**os.environ, "TMPDIR": str(folder), "HOME": str(folder)}
    done = subprocess.run(
        [sys.executable, "-m", "computefence", "fleet", "check", "--demo", "--perf", "-f", "json", "-o", str(report)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    return report


def _show(report: Path, *argv: str) -> str:
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "computefence", "report", "show", str(report), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout


def test_terminal_shows_each_figure_beside_its_median(saved_perf_report):
    text = _show(saved_perf_report)

    section = text[text.index("GPU performance (--perf)") :]
    assert "gpu.perf-compute  NVIDIA H100 80GB HBM3 · median 742.0 TFLOPS" in section
    assert "pod-healthy  742.0 TFLOPS  100% of the median" in section
    assert "pod-ephemeral-ckpt  148.0 TFLOPS  100% of the median" in section


def test_markdown_has_the_perf_figures_and_the_pods_to_give_back(saved_perf_report):
    text = _show(saved_perf_report, "--format", "markdown")

    assert (
        "| gpu.perf-compute | NVIDIA H100 80GB HBM3 (median 742.0 TFLOPS) | pod-healthy | 742.0 TFLOPS | 100% |" in text
    )
    give_back = text[text.index("### Give these pods back") :]
    assert "| pod-old-driver | \\$1.29/h | gpu.driver-too-old |" in give_back
