"""`computefence fleet check --demo`, the README's first command, end to end as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from computefence.demo.fleet import DEMO_PODS


def _env(tmp_path: Path) -> dict[str, str]:
    # A user with no ~/.ssh and no ComputeFence state, whose temporary files we can inspect.
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "160"}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "computefence", "fleet", "check", "--demo", *args]


def _left_behind(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


def test_demo_json_report_shows_every_fault_and_exits_1(tmp_path, expected_blockers, healthy_pod_warnings):
    started = time.monotonic()
    result = subprocess.run(_cli("--format", "json"), env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    hosts = {h["name"]: h for h in report["hosts"]}
    assert set(hosts) == {pod.name for pod in DEMO_PODS}
    for name, expected in expected_blockers.items():
        assert hosts[name]["status"] == "ok", hosts[name]["reason"]
        assert {f["check"] for f in hosts[name]["findings"] if f["severity"] == "block"} == expected, name
        assert all(f["fix"] for f in hosts[name]["findings"] if f["severity"] == "block"), name
    unreachable = hosts["pod-unreachable"]
    assert unreachable["status"] == "unreachable"
    assert unreachable["fix"].startswith("ssh ")
    summary = report["summary"]
    clean = 0 if expected_blockers["pod-healthy"] or healthy_pod_warnings else 1
    assert (summary["verdict"], summary["hosts_clean"], summary["not_ok"]) == ("block", clean, 1)
    assert summary["cost_per_hour_at_risk"] < summary["cost_per_hour_total"]
    # The healthy pod's HF_TOKEN is reported as present, never by value.
    assert "hf_demoToken" not in result.stdout + result.stderr
    assert _left_behind(tmp_path) == []
    assert elapsed < 20, f"the demo took {elapsed:.1f}s"


def test_demo_rich_report_and_a_clean_subset(tmp_path, expected_blockers):
    env = _env(tmp_path)
    rich = subprocess.run(_cli(), env=env, capture_output=True, text=True, timeout=60)
    assert rich.returncode == 1, rich.stderr
    for pod in DEMO_PODS:
        assert pod.name in rich.stdout
    assert "accelerate.num-processes" in rich.stdout

    healthy = subprocess.run(
        _cli("--limit", "pod-healthy", "--format", "json"), env=env, capture_output=True, text=True, timeout=60
    )
    assert healthy.returncode == (1 if expected_blockers["pod-healthy"] else 0), healthy.stderr
    assert [h["name"] for h in json.loads(healthy.stdout)["hosts"]] == ["pod-healthy"]
    assert _left_behind(tmp_path) == []


def test_demo_rejects_other_target_sources(tmp_path):
    result = subprocess.run(_cli("-H", "somehost"), env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--demo" in result.stderr
    assert "Traceback" not in result.stderr


def test_ctrl_c_during_the_demo_exits_130_and_cleans_up(tmp_path):
    proc = subprocess.Popen(
        _cli("--format", "json"), env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # The unreachable pod answers first, long before the probes finish.
    first = proc.stderr.readline()
    assert "[1/" in first, first
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    statuses = {h["name"]: h["status"] for h in json.loads(stdout)["hosts"]}
    assert "cancelled" in statuses.values()
    assert _left_behind(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a noexec tmpfs needs root")
def test_demo_runs_from_the_cache_dir_when_tmp_is_noexec(tmp_path, expected_blockers):
    env = _env(tmp_path)
    noexec = tmp_path / "tmp"
    subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=64m", "cf-test-noexec", str(noexec)], check=True)
    try:
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        result = subprocess.run(_cli("--format", "json"), env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stderr
        hosts = {h["name"]: h for h in json.loads(result.stdout)["hosts"]}
        # The pods' fake nvidia-smi ran: no pod lost its GPU to a noexec mount.
        blockers = {
            name: {f["check"] for f in hosts[name]["findings"] if f["severity"] == "block"}
            for name in expected_blockers
        }
        assert blockers == expected_blockers
        assert list((tmp_path / "cache" / "computefence").iterdir()) == []
        assert _left_behind(tmp_path) == []
    finally:
        subprocess.run(["umount", str(noexec)], check=True)
