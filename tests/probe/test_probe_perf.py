"""The --perf canary in the training interpreter's (fake) torch: figures, fallbacks, and the
pods it must leave alone."""

from __future__ import annotations

from computefence.evaluate import evaluate_host
from computefence.models import CheckOptions, Severity

H100_FIGURES = {"tflops": 745.0, "h2d_gbps": 53.2, "d2h_gbps": 51.8, "allreduce_busbw_gbps": 468.0, "p2p_gbps": 41.0}
PERF_CHECKS = ("gpu.perf-compute", "gpu.perf-pcie", "gpu.perf-interconnect")


def _perf_findings(facts):
    return {f.check: f for f in evaluate_host(facts, CheckOptions()) if f.check in PERF_CHECKS}


def test_canary_measures_every_gpu_and_nccl(pod):
    pod.nvidia("h100x8")
    pod.torch("cu124", canary=H100_FIGURES)
    facts = pod.run(perf=True).facts
    perf = facts.perf
    assert perf.ran and perf.error is None and facts.collectors["perf"].ok
    assert [g.index for g in perf.gpus] == list(range(8))
    assert {(g.name, g.dtype, g.matmul_tflops, g.h2d_gbps, g.d2h_gbps) for g in perf.gpus} == {
        ("NVIDIA H100 80GB HBM3", "bfloat16", 745.0, 53.2, 51.8)
    }
    assert (perf.interconnect_method, perf.interconnect_gbps) == ("nccl-allreduce", 468.0)
    findings = _perf_findings(facts)
    assert [f.severity for f in findings.values()] == [Severity.PASS] * 3


def test_a_slow_gpu_and_nccl_falling_back_to_p2p(pod):
    pod.nvidia("h100x8")
    pod.torch("cu124", canary={**H100_FIGURES, "tflops": [745.0] * 7 + [280.0], "allreduce_busbw_gbps": None})
    facts = pod.run(perf=True).facts
    perf = facts.perf
    assert perf.gpus[7].matmul_tflops == 280.0
    assert (perf.interconnect_method, perf.interconnect_gbps) == ("p2p-copy", 41.0)
    assert perf.interconnect_error.startswith("NCCL all-reduce: RuntimeError: NCCL Error 2: unhandled system error")
    compute = [f for f in evaluate_host(facts, CheckOptions()) if f.check == "gpu.perf-compute"]
    assert [(f.severity, f.subject) for f in compute] == [(Severity.WARN, "GPU 7")]
    # P2P over NVLink at 41 GB/s is under half of what NVLink carries.
    assert _perf_findings(facts)["gpu.perf-interconnect"].severity is Severity.WARN


def test_busy_gpus_get_no_canary(pod):
    pod.nvidia("h100x1-busy")
    pod.torch("cu124", canary=H100_FIGURES)
    facts = pod.run(perf=True).facts
    assert not facts.perf.ran and facts.perf.gpus == []
    assert facts.perf.skipped_reason.startswith("other processes use the GPUs (GPU 0 holds 71893 MiB)")
    note = _perf_findings(facts)["gpu.perf-compute"]
    assert note.severity is Severity.SKIP and "canary never disturbs a running job" in note.message


def test_without_perf_nothing_heavy_runs(pod):
    pod.nvidia("h100x8")
    pod.torch("cu124", canary=H100_FIGURES)
    facts = pod.run().facts
    assert facts.perf is None and "perf" not in facts.collectors
    assert _perf_findings(facts) == {}


def test_no_cuda_no_canary(pod):
    pod.nvidia("h100x1")
    pod.torch("cpu")
    assert pod.run(perf=True).facts.perf.skipped_reason == "torch cannot use CUDA here"
