"""gpu.*: what holds across the GPU checks together. Each check's own cases, facts in and findings
out, are data in tests/evaluate/cases/gpu.*/."""

from __future__ import annotations

from evaluate_builders import laptop, no_torch, only, problems, runpod_pod, torch

from computefence.evaluate import evaluate_host
from computefence.models import CheckOptions, Facts

NO_CHECKS = CheckOptions()
GPU_CHECKS = (
    "gpu.driver",
    "gpu.cuda-unavailable",
    "gpu.torch-cpu-build",
    "gpu.driver-too-old",
    "gpu.arch-unsupported",
    "gpu.memory-in-use",
    "gpu.count-mismatch",
)


def _gpu_findings(facts: Facts, checks: CheckOptions = NO_CHECKS, provider=None):
    return [f for f in evaluate_host(facts, checks, provider) if f.check.startswith("gpu.")]


def test_healthy_pod_passes_every_gpu_check():
    findings = _gpu_findings(runpod_pod())
    assert {f.check for f in findings} == set(GPU_CHECKS)
    assert problems(findings) == []
    assert only(findings, "gpu.driver").message == "driver 550.54.15 (CUDA 12.4) sees 1 GPU: NVIDIA H100 80GB HBM3"


def test_cpu_torch_on_a_cpu_machine_is_not_a_gpu_problem():
    facts = laptop().model_copy(update={"torch": torch(version="2.13.0+cpu", cuda=None, available=False, count=0)})
    assert problems(_gpu_findings(facts)) == []


def test_missing_torch_silences_torch_dependent_gpu_checks():
    findings = _gpu_findings(runpod_pod().model_copy(update={"torch": no_torch()}))
    assert {f.check for f in findings} == {"gpu.driver", "gpu.memory-in-use"}
