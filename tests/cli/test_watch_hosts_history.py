"""`fleet watch --hosts-history DIR`: a stalled run on a pod whose machine failed a fleet check
in that history is told to give the pod back; a DIR that is not one is a one-line error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from computefence.demo.fleet import _pod_id, demo_machine_id
from computefence.models import Finding, HostReport, HostStatus, ProviderInfo, Remedy, Report, Severity
from computefence.operations.history import History

ECC = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="2 uncorrectable ECC errors", remedy=Remedy.REPLACE)


def _watch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp")}
    argv = [sys.executable, "-m", "computefence", "fleet", "watch", "--demo", "--once", "--format", "json", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_a_stall_on_a_machine_the_history_saw_fail_says_to_give_the_pod_back(tmp_path):
    history = tmp_path / "checks"
    history.mkdir()
    # The demo's stalled pod is a RunPod pod: the ledger keys it by its machineId.
    info = ProviderInfo(provider="runpod", pod_id=_pod_id("run-stalled"), machine_id=demo_machine_id("run-stalled"))
    failed = HostReport(name="run-stalled", status=HostStatus.OK, provider=info, findings=[ECC])
    History(history, keep=10).save(
        Report(tool_version="test", kind="fleet", generated_at="2026-12-01T10:00:00Z", hosts=[failed])
    )
    result = _watch(tmp_path, "--hosts-history", str(history))
    hosts = {h["name"]: h for h in json.loads(result.stdout)["hosts"]}
    (stalled,) = [f for f in hosts["run-stalled"]["findings"] if f["check"] == "run.stalled"]
    assert (
        f"(runpod {demo_machine_id('run-stalled')}) failed 1 of 1 fleet checks before (gpu.ecc)"
        in stalled["fix_advice"]
    )
    assert "give the pod back" in stalled["fix_advice"]


def test_a_hosts_history_that_is_not_a_directory(tmp_path):
    result = _watch(tmp_path, "--hosts-history", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().endswith(f"--hosts-history {tmp_path / 'nowhere'}: not a directory")
