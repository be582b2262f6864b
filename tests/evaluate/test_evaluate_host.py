"""evaluate_host as a whole, and select_findings."""

from __future__ import annotations

import pytest
from evaluate_builders import laptop, problems, runpod_pod

from computefence.errors import ConfigError
from computefence.evaluate import CHECK_IDS, CHECKS, RULES, evaluate_host, select_findings
from computefence.models import CheckOptions, Facts, Finding, Severity


def test_a_well_configured_pod_is_all_green():
    findings = evaluate_host(runpod_pod(n_gpus=2), CheckOptions())
    assert problems(findings) == []
    assert len(findings) >= 13


def test_a_cpu_laptop_without_torch_gets_an_honest_clean_report():
    findings = evaluate_host(laptop(), CheckOptions())
    assert problems(findings) == []
    messages = {f.check: f.message for f in findings}
    assert messages["gpu.driver"] == "no NVIDIA GPU on this machine; GPU checks skipped"
    assert "torch is not installed" in messages["python.torch-missing"]
    # What was never checked says so as a skip, not as a pass.
    skipped = {f.check for f in findings if f.severity is Severity.SKIP}
    assert skipped == {
        "gpu.driver",
        "python.torch-missing",
        "storage.hf-cache",
        "storage.no-volume",
        "storage.disk-headroom",
        "system.shm",
    }


def test_the_same_laptop_with_expect_gpu_is_judged_as_a_gpu_machine():
    blocked = {f.check for f in evaluate_host(laptop(), CheckOptions(expect_gpu=True)) if f.severity is Severity.BLOCK}
    # No GPU, no torch, and its 3 GB of free disk now counts against the HF cache.
    assert blocked == {"gpu.driver", "python.torch-missing", "storage.disk-headroom"}


def test_empty_facts_never_crash():
    findings = evaluate_host(Facts(), CheckOptions(output_dir="/out", accelerate_config="/a.yaml", expect_gpu=True))
    assert {f.check for f in findings} >= {"gpu.driver", "storage.output-dir", "accelerate.num-processes"}


def test_every_finding_is_one_line_and_every_problem_has_a_fix():
    for facts in (runpod_pod(volume=False, hf_on_volume=False, shm=64e6, root_free=2e9), laptop(), Facts()):
        for finding in evaluate_host(facts, CheckOptions(output_dir="./out", expect_gpu=True)):
            assert "\n" not in finding.message and finding.check in CHECK_IDS
            if finding.severity in (Severity.WARN, Severity.BLOCK):
                assert finding.fix and not any(
                    "\n" in text for text in [*finding.fix.commands, finding.fix.advice or ""]
                )


def test_registry_lists_every_check_of_the_issue():
    assert set(CHECKS) == {
        "storage.hf-cache",
        "storage.output-dir",
        "storage.no-volume",
        "storage.disk-headroom",
        "system.shm",
        "gpu.driver",
        "gpu.cuda-unavailable",
        "gpu.torch-cpu-build",
        "gpu.driver-too-old",
        "gpu.arch-unsupported",
        "gpu.memory-in-use",
        "gpu.count-mismatch",
        "gpu.missing",
        "accelerate.num-processes",
        "python.torch-missing",
        "probe.timeout",
        "dataset.unreadable",
        "dataset.columns",
        "dataset.duplicates",
        "dataset.conflicting-labels",
        "dataset.missing-values",
        "dataset.label-skew",
        "gpu.ecc",
        "gpu.pcie-link",
        "gpu.throttle",
        "gpu.power-limit",
        "gpu.mig",
        "gpu.compute-mode",
        "gpu.fabric-manager",
        "gpu.xid",
        "gpu.perf-compute",
        "gpu.perf-pcie",
        "gpu.perf-interconnect",
        "policy.requirement",
        "policy.hardware",
        "env.drift",
        "env.outlier",
        # issue #23: sized from the policy's job:
        "storage.budget",
        "storage.model-download",
        "gpu.memory-budget",
        "run.no-job",
        "run.gpu-idle",
        "run.loss-plateau",
        "run.loss-nan",
        "run.stalled",
        "run.checkpoint-ephemeral",
        "run.disk-eta",
    }
    assert len(RULES) == 31


FINDINGS = [
    Finding(check=c, severity=Severity.PASS, message="m")
    for c in ("storage.hf-cache", "storage.no-volume", "gpu.driver", "system.shm")
]


@pytest.mark.parametrize(
    ("only", "skip", "kept"),
    [
        ([], [], ["storage.hf-cache", "storage.no-volume", "gpu.driver", "system.shm"]),
        (["gpu.driver"], [], ["gpu.driver"]),
        (["storage"], [], ["storage.hf-cache", "storage.no-volume"]),
        (["storage.*"], ["storage.no-volume"], ["storage.hf-cache"]),
        ([], ["storage", "system.shm"], ["gpu.driver"]),
    ],
)
def test_select_findings(only, skip, kept):
    assert [f.check for f in select_findings(FINDINGS, only, skip)] == kept


@pytest.mark.parametrize(("only", "skip"), [(["gpu.drvier"], []), ([], ["stor"]), (["storage.x*"], [])])
def test_a_pattern_naming_no_check_is_an_error_not_a_green_run(only, skip):
    with pytest.raises(ConfigError, match="names no check") as caught:
        select_findings(FINDINGS, only, skip)
    assert "\n" not in str(caught.value)


def test_checks_registered_elsewhere_can_be_selected_by_the_ids_they_emit():
    dataset = Finding(check="dataset.conflicting-labels", severity=Severity.WARN, message="m")
    assert select_findings([*FINDINGS, dataset], ["dataset"], []) == [dataset]
