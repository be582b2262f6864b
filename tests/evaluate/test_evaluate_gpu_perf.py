"""gpu.perf-compute, gpu.perf-pcie, gpu.perf-interconnect: the --perf canary's figures against
providers/hardware/gpu-performance.yaml, and each pod beside the fleet median. One pod's cases,
facts in and findings out, are data in tests/evaluate/cases/gpu.perf-*/."""

from __future__ import annotations

import pytest
from evaluate_builders import only, problems, runpod_pod

from computefence.errors import ConfigError
from computefence.evaluate import build_report, evaluate_host
from computefence.evaluate.checks.gpu_perf import load_performance_data
from computefence.models import CheckOptions, Facts, GpuPerf, HostReport, HostStatus, PerfFacts, Severity

H100 = "NVIDIA H100 80GB HBM3"
PERF_CHECKS = ("gpu.perf-compute", "gpu.perf-pcie", "gpu.perf-interconnect")


def perf_pod(
    n: int = 8,
    tflops: float = 740.0,
    h2d: float = 53.0,
    d2h: float = 52.0,
    interconnect: float | None = 470.0,
    method: str = "nccl-allreduce",
    name: str = H100,
    **perf,
) -> Facts:
    pod = runpod_pod(n_gpus=n)
    gpus = [
        GpuPerf(index=i, name=name, dtype="bfloat16", matmul_tflops=tflops, h2d_gbps=h2d, d2h_gbps=d2h)
        for i in range(n)
    ]
    values = dict(
        ran=True,
        duration_s=9.5,
        gpus=gpus,
        interconnect_method=method if n > 1 else None,
        interconnect_gbps=interconnect if n > 1 else None,
    )
    values.update(perf)
    return pod.model_copy(update={"perf": PerfFacts(**values)})


def _perf(facts: Facts) -> list:
    return [f for f in evaluate_host(facts, CheckOptions()) if f.check in PERF_CHECKS]


def test_healthy_h100x8_passes_with_its_figures_and_the_reference():
    findings = _perf(perf_pod())
    assert problems(findings) == [] and len(findings) == 3
    assert only(findings, "gpu.perf-compute").message == "bf16 matmul 740 TFLOPS per GPU (a healthy H100 SXM: ~742)"
    assert (
        only(findings, "gpu.perf-interconnect").message
        == "NCCL all-reduce bus bandwidth 470.0 GB/s across 8 GPUs (~360 expected over H100 SXM NVLink)"
    )


def test_fleet_report_puts_each_pod_beside_the_fleet_median():
    hosts = []
    for name, tflops in (("pod-a", 740.0), ("pod-b", 745.0), ("pod-c", 310.0)):
        facts = perf_pod(tflops=tflops)
        hosts.append(
            HostReport(name=name, status=HostStatus.OK, facts=facts, findings=evaluate_host(facts, CheckOptions()))
        )
    report = build_report(hosts, kind="fleet")
    slow = [f for f in report.hosts[2].findings if f.check == "gpu.perf-compute"]
    assert all(f.severity is Severity.WARN for f in slow) and len(slow) == 8
    assert slow[0].message.endswith("; this pod 310.0 TFLOPS, median of 3 pods with NVIDIA H100 80GB HBM3 740.0")
    fine = only(report.hosts[0].findings, "gpu.perf-compute")
    assert fine.message.endswith("this pod 740.0 TFLOPS, median of 3 pods with NVIDIA H100 80GB HBM3 740.0")


def test_pods_are_compared_with_pods_of_the_same_gpu_model_only():
    hosts = []
    for name, facts in (
        ("h100-a", perf_pod(n=1)),
        ("h100-b", perf_pod(n=1, tflops=700.0)),
        ("rtx", perf_pod(n=1, name="NVIDIA GeForce RTX 4090", tflops=150.0, h2d=24.0, d2h=25.0)),
    ):
        hosts.append(
            HostReport(name=name, status=HostStatus.OK, facts=facts, findings=evaluate_host(facts, CheckOptions()))
        )
    report = build_report(hosts, kind="fleet")
    assert (
        "median of 2 pods with NVIDIA H100 80GB HBM3 720.0"
        in only(report.hosts[1].findings, "gpu.perf-compute").message
    )
    assert "median" not in only(report.hosts[2].findings, "gpu.perf-compute").message


def test_performance_data_covers_the_issue_models_with_sources():
    data = load_performance_data()
    for name in (
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 PCIe",
        "NVIDIA H200",
        "NVIDIA B200",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA L40S",
        "NVIDIA L4",
        "NVIDIA A10",
        "NVIDIA RTX A6000",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA GeForce RTX 3090",
    ):
        model = data.model_of(name)
        assert model is not None and model.source and 0 < model.achievable <= 1, name
    assert data.model_of("NVIDIA L40S").model == "L40S" and data.model_of("NVIDIA L4").model == "L4"
    assert data.model_of("NVIDIA A100 80GB PCIe").model == "A100 PCIe"
    assert set(data.pcie.lane_gbps) == {1, 2, 3, 4, 5, 6}


def test_a_broken_data_file_is_a_config_error_naming_it(tmp_path):
    bad = tmp_path / "gpu-performance.yaml"
    bad.write_text("pcie: {lane_gbps: {4: fast}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="gpu-performance.yaml: pcie"):
        load_performance_data(bad)
