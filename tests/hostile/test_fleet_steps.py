"""Fleet-wide steps that trip on one pod's facts (class 3): env.outlier and env.drift across the
fleet, perf beside the fleet median and version drift look at every pod at once, so a value
none of them foresaw would end the run without a report for anyone. That pod is probe_failed
naming the step and the error; every other pod's result, and the report, still come out.

Each step is made to trip the way a rule does in test_absurd_numbers (a function it calls
raising on one pod's facts): the guard is for the values no one has thought of yet.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from computefence.cli import main
from computefence.evaluate import fleet
from computefence.evaluate.checks import environment, gpu_perf
from computefence.models import HostStatus, Report

DEMO = Path(__file__).resolve().parents[2] / "computefence/demo/recordings/fleet"
TRIPPING = "demohealthy"  # pod-healthy's RUNPOD_POD_ID


def _trips(facts) -> bool:
    return facts is not None and facts.identity.provider_hints.get("RUNPOD_POD_ID") == TRIPPING


def _check(capsys, *argv: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main(["fleet", "check", "--format", "json", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    report = Report.model_validate_json(out)
    return code, {h.name: h for h in report.hosts}, err


def _raising_for_the_tripping_pod(original):
    def tripping(facts, *args, **kwargs):
        if _trips(facts):
            raise OverflowError("int too large to convert to float")
        return original(facts, *args, **kwargs)

    return tripping


def test_env_outlier_tripping_on_one_pod_costs_that_pod_only(monkeypatch, capsys):
    monkeypatch.setattr(environment, "fingerprint", _raising_for_the_tripping_pod(environment.fingerprint))
    code, hosts, _ = _check(capsys, "--replay", str(DEMO))
    assert code == 1
    assert hosts["pod-healthy"].status is HostStatus.PROBE_FAILED
    assert hosts["pod-healthy"].reason == (
        "its answer could not be judged (env.outlier across the fleet: OverflowError: int too large to convert to float)"
    )
    # The others are judged as ever, and compared with each other.
    assert [f.check for f in hosts["pod-cpu-torch"].blocking_findings] == ["gpu.torch-cpu-build"]
    assert hosts["pod-old-driver"].status is HostStatus.OK and hosts["pod-old-driver"].blockers


def test_env_drift_against_a_lock_tripping_on_one_pod_costs_that_pod_only(monkeypatch, tmp_path, capsys):
    _, judged, _ = _check(capsys, "--replay", str(DEMO))
    lock = tmp_path / "computefence.lock.json"
    lock.write_text(environment.build_lock(list(judged.values())).model_dump_json())
    original = environment.drift_finding

    def tripping(host, *args, **kwargs):
        if _trips(host.facts):
            raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
        return original(host, *args, **kwargs)

    monkeypatch.setattr(environment, "drift_finding", tripping)
    code, hosts, _ = _check(capsys, "--replay", str(DEMO), "--baseline", str(lock))
    assert code == 1
    assert hosts["pod-healthy"].status is HostStatus.PROBE_FAILED
    assert "env.drift across the fleet: ValueError: Exceeds the limit" in hosts["pod-healthy"].reason
    assert {f.check for f in hosts["pod-cpu-torch"].findings} >= {"env.drift"}


def _with_perf(tmp_path: Path) -> Path:
    """The demo recordings, with pod-healthy and pod-cpu-torch measured on the same GPU model."""
    folder = tmp_path / "replay"
    shutil.copytree(DEMO, folder)
    for name, tflops in (("1-pod-healthy.json", 700.0), ("2-pod-cpu-torch.json", 400.0)):
        path = folder / name
        recording = json.loads(path.read_text())
        facts = json.loads(recording["probe_output"])
        gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "matmul_tflops": tflops, "h2d_gbps": 50.0, "d2h_gbps": 50.0}
        facts["perf"] = {"ran": True, "gpus": [gpu, dict(gpu, index=1)], "interconnect_gbps": 300.0}
        recording["probe_output"] = json.dumps(facts)
        path.write_text(json.dumps(recording))
    return folder


def test_perf_beside_the_fleet_median_tripping_on_one_pod_costs_that_pod_only(monkeypatch, tmp_path, capsys):
    folder = _with_perf(tmp_path)
    monkeypatch.setattr(gpu_perf, "_figures", _raising_perf(gpu_perf._figures))
    code, hosts, _ = _check(capsys, "--replay", str(folder))
    assert code == 1
    assert hosts["pod-healthy"].status is HostStatus.PROBE_FAILED
    assert "perf beside the fleet median across the fleet: OverflowError" in hosts["pod-healthy"].reason
    assert hosts["pod-cpu-torch"].status is HostStatus.OK
    assert any(f.check.startswith("gpu.perf-") for f in hosts["pod-cpu-torch"].findings)


def _raising_perf(original):
    def tripping(perf):
        if perf.gpus and perf.gpus[0].matmul_tflops == 700.0:  # pod-healthy's figure
            raise OverflowError("int too large to convert to float")
        return original(perf)

    return tripping


def test_version_drift_tripping_on_one_pod_costs_that_pod_only(monkeypatch, capsys):
    monkeypatch.setattr(fleet, "component_versions", _raising_for_the_tripping_pod(fleet.component_versions))
    code, hosts, _ = _check(capsys, "--replay", str(DEMO))
    assert code == 1
    assert hosts["pod-healthy"].status is HostStatus.PROBE_FAILED
    assert "version drift across the fleet: OverflowError" in hosts["pod-healthy"].reason
    assert hosts["pod-cpu-torch"].status is HostStatus.OK


def test_a_fleet_step_failing_whoever_is_left_blames_nobody_and_says_so(monkeypatch, capsys):
    def always(hosts, *args, **kwargs):
        if len([h for h in hosts if h.status is HostStatus.OK]) >= 3:
            raise RuntimeError("a majority no one can compute")
        return {}

    monkeypatch.setattr(environment, "outlier_findings", always)
    code, hosts, _ = _check(capsys, "--replay", str(DEMO))
    assert code == 1
    checked = [h for h in hosts.values() if h.status is HostStatus.OK]
    assert len(checked) == 5  # no pod made probe_failed for it
    for host in checked:
        (outlier,) = [f for f in host.findings if f.check == "env.outlier"]
        assert outlier.severity.value == "skip"
        assert outlier.message == "not compared with the fleet (RuntimeError: a majority no one can compute)"


@pytest.mark.parametrize("fmt", ["rich", "markdown"])
def test_the_report_names_the_tripping_pod_in_every_format(fmt, monkeypatch, capsys):
    monkeypatch.setattr(environment, "fingerprint", _raising_for_the_tripping_pod(environment.fingerprint))
    capsys.readouterr()
    code = main(["fleet", "check", "--replay", str(DEMO), "--format", fmt])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    assert "env.outlier across the fleet" in " ".join(out.split())


def test_the_views_of_a_saved_report_leave_out_a_pod_whose_figures_break_them(monkeypatch, tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    saved = runs / "20261201T120000Z.json"
    assert main(["fleet", "check", "--replay", str(_with_perf(tmp_path)), "--format", "json", "-o", str(saved)]) == 1
    # The saved file's pod-healthy now breaks the figures, as an edited or foreign report may.
    monkeypatch.setattr(gpu_perf, "_figures", _raising_perf(gpu_perf._figures))
    figures = gpu_perf.saved_fleet_figures(Report.model_validate_json(saved.read_text()).hosts)
    assert figures and all(list(f.pods) == ["pod-cpu-torch"] for f in figures)
    capsys.readouterr()
    page = tmp_path / "report.html"
    assert main(["report", "show", "--format", "html", "-o", str(page), str(saved)]) == 1
    assert main(["hosts", "--history", str(runs), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "pod-cpu-torch" in page.read_text()
    ledger = json.loads(out)
    assert [m["perf"] for m in ledger["hosts"] if m["perf"]]  # the other pod's figures are still there
