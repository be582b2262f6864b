"""`computefence fleet check --demo`: the README's first command, whole flow, no pods needed."""

from __future__ import annotations

import subprocess
import sys

from computefence.demo.fleet import DEMO_PODS


def test_demo_checks_its_simulated_fleet(run_cli):
    result = run_cli("fleet", "check", "--demo", "--format", "json")

    assert result.code == 1
    statuses = {h.name: h.status.value for h in result.report.hosts}
    assert set(statuses) == {pod.name for pod in DEMO_PODS}
    assert statuses.pop("pod-unreachable") == "unreachable"
    assert set(statuses.values()) == {"ok"}
    # Plain progress lines on a non-terminal stderr, one per pod.
    assert result.stderr.count("computefence: [") == len(DEMO_PODS)
    assert f"[{len(DEMO_PODS)}/{len(DEMO_PODS)}]" in result.stderr


def test_demo_takes_limit_but_not_other_sources(run_cli, tmp_path):
    limited = run_cli("fleet", "check", "--demo", "--limit", "pod-healthy", "--format", "json")
    assert [h.name for h in limited.report.hosts] == ["pod-healthy"]

    mixed = run_cli("fleet", "check", "--demo", "-i", str(tmp_path / "pods.yaml"))
    assert mixed.code == 2
    assert "--demo checks its own simulated pods; drop --inventory" in mixed.stderr


def test_unknown_check_id_fails_before_any_pod_is_contacted(run_cli):
    result = run_cli("fleet", "check", "--demo", "--only", "gpu.no-such-check")
    assert result.code == 2
    assert result.stderr.startswith("computefence: error: --only 'gpu.no-such-check' names no check")
    assert "computefence: [" not in result.stderr


def test_open_files_limit_is_raised_for_the_concurrency():
    # In a child process: the limit is process-wide.
    script = (
        "import resource\n"
        "from computefence.cli.connection import ensure_open_files\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))\n"
        "ensure_open_files(500)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    soft, hard = (int(v) for v in out.split())
    assert soft == (564 if hard < 0 else min(564, hard))
