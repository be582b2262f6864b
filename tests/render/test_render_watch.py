"""A `fleet watch` report in each format: the watch table (step, pace, loss, GPU, newest
checkpoint) at 80 and 120 columns, Markdown, and Prometheus through promtool."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from computefence.evaluate import build_report
from computefence.models import Facts, Finding, HostReport, HostStatus, Severity, WatchFacts
from computefence.render import render

NOW = 1_800_000_000.0


def _watch(step: int, loss, util: float, checkpoint: str, age_s: float) -> Facts:
    return Facts(
        watch=WatchFacts.model_validate(
            {
                "gpu": {
                    "nvidia_smi_found": True,
                    "samples": [
                        {"gpus": [{"index": 0, "utilization_pct": util}, {"index": 1, "utilization_pct": util}]}
                    ],
                },
                "processes": {"processes": [{"pid": 7, "argv": ["torchrun", "train.py"]}]},
                "outputs": {
                    "now": NOW,
                    "dirs": [
                        {
                            "path": "/workspace/out",
                            "checkpoints": [
                                {"path": f"/workspace/out/{checkpoint}", "name": checkpoint, "mtime": NOW - age_s}
                            ],
                        }
                    ],
                },
                "log": {
                    "path": "/workspace/train.log",
                    "losses": [1.2, loss],
                    "progress": {"step": step, "total": 12000, "seconds_per_step": 0.42},
                },
            }
        )
    )


def _report():
    nan = Finding(check="run.loss-nan", severity=Severity.BLOCK, message="10 of the last 10 losses are nan", fix="x")
    hosts = [
        HostReport(name="pod-a", status=HostStatus.OK, facts=_watch(3400, 0.612, 97.0, "checkpoint-3000", 240)),
        HostReport(
            name="pod-b", status=HostStatus.OK, facts=_watch(800, "nan", 91.0, "checkpoint-500", 4000), findings=[nan]
        ),
        HostReport(name="pod-c", status=HostStatus.UNREACHABLE, reason="connection refused"),
    ]
    return build_report(hosts, kind="watch")


@pytest.mark.parametrize("width", [80, 120])
def test_the_watch_table_fits_the_terminal(width):
    text = render(_report(), "rich", width=width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    # pod-a's row, with the line its wrapped cells continue on at 80 columns.
    start = next(i for i, line in enumerate(lines) if line.startswith("pod-a"))
    row = set(" ".join(lines[start : start + 2]).split())
    # 8,600 steps to go at 0.42 s a step: the pace is there at any width.
    for cell in ("3400/12000", "0.612", "97%", "checkpoint-3000 (4m)", "healthy", "2.4 it/s, 60m left"):
        assert set(cell.split()) <= row, cell
    assert "nan" in next(line for line in lines if line.startswith("pod-b"))
    assert "FAILING" in text and "ComputeFence fleet watch" in text
    if width >= 100:
        assert "2.4 it/s, 60m left" in lines[start]


def test_markdown_has_the_watch_table():
    text = render(_report(), "markdown")
    assert "| Pod | Step | Pace | Loss | GPU util | Newest checkpoint | Status |" in text
    assert "| pod-a | 3400/12000 | 2.4 it/s, 60m left | 0.612 | 97% | checkpoint-3000 (4m) | healthy |" in text


def test_prometheus_watch_gauges_pass_promtool():
    text = render(_report(), "prometheus")
    assert 'computefence_watch_step{host="pod-a"} 3400' in text
    assert 'computefence_watch_seconds_left{host="pod-a"} 3612.0' in text
    assert 'computefence_watch_loss{host="pod-b"} NaN' in text
    assert 'computefence_watch_gpu_utilization_percent{host="pod-a",gpu="1"} 97.0' in text
    assert "computefence_host_info" not in text  # a watch has no versions to show
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
