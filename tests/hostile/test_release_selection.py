"""`fleet release` names what selected a pod and nothing else: a saved report's warnings
beside the blockers are no reason the pod is given back, so they are not in `selected_by`."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from computefence.cli import main
from computefence.models import (
    Facts,
    Finding,
    GpuDevice,
    GpuFacts,
    HostReport,
    HostStatus,
    ProviderInfo,
    Remedy,
    Report,
    Severity,
)


def _finding(check: str, severity: Severity) -> Finding:
    return Finding(check=check, severity=severity, message=check, remedy=Remedy.REPLACE, subject="GPU 0")


def test_selected_by_names_the_blockers_not_the_warnings_beside_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    gpu = GpuDevice(index=0, name="NVIDIA H100 80GB HBM3", memory_used_mib=3, memory_total_mib=81559)
    host = HostReport(
        name="vast-ecc",
        status=HostStatus.OK,
        host="198.51.100.20",
        port=40022,
        provider=ProviderInfo(provider="vast", pod_id="4242"),
        facts=Facts(gpu=GpuFacts(nvidia_smi_found=True, exit_code=0, gpus=[gpu])),
        findings=[
            _finding("gpu.throttle", Severity.WARN),
            _finding("gpu.ecc", Severity.BLOCK),
            _finding("gpu.pcie-link", Severity.WARN),
        ],
    )
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    saved = tmp_path / "report.json"
    saved.write_text(Report(tool_version="test", kind="fleet", generated_at=now, hosts=[host]).model_dump_json())

    code = main(["fleet", "release", "--from", str(saved), "--dry-run", "--format", "json"])

    (pod,) = json.loads(capsys.readouterr().out)["pods"]
    assert code == 0 and pod["outcome"] == "would_release"
    assert pod["selected_by"] == ["gpu.ecc"]
