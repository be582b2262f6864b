"""fleet fix's planning and judging, from host reports alone: which steps run, which do not and
why, and each finding's outcome after the re-probe."""

from __future__ import annotations

from computefence.models import (
    Facts,
    Finding,
    Fix,
    FixStep,
    GpuDevice,
    GpuFacts,
    HostReport,
    HostStatus,
    Severity,
    StepKind,
)
from computefence.operations.fix import judge, plan_host

HF = Finding(
    check="storage.hf-cache",
    severity=Severity.WARN,
    message="HF cache on the container disk",
    subject="/root/.cache/huggingface/hub",
    fix=Fix(steps=[FixStep.safe("mkdir -p /workspace/hf"), FixStep.safe("persist HF_HOME")]),
)
FABRIC = Finding(
    check="gpu.fabric-manager",
    severity=Severity.BLOCK,
    message="fabric not initialised",
    fix=Fix(steps=[FixStep.disruptive("systemctl start nvidia-fabricmanager"), FixStep.inspect("nvidia-smi -q")]),
)
CLEANUP = Finding(
    check="storage.model-download",
    severity=Severity.BLOCK,
    message="no room",
    fix=Fix(steps=[FixStep.destructive("huggingface-cli delete-cache"), FixStep.safe("mkdir -p /workspace/x")]),
)
RESTART = Finding(
    check="gpu.driver",
    severity=Severity.BLOCK,
    message="wedged",
    fix=Fix(steps=[FixStep.local("runpodctl restart pod x", StepKind.DISRUPTIVE)], advice="restart it"),
)
ADVICE = Finding(check="storage.no-volume", severity=Severity.WARN, message="no volume", fix=Fix(advice="add one"))


def _host(*findings: Finding, used_mib: int = 3) -> HostReport:
    gpus = GpuFacts(gpus=[GpuDevice(index=0, name="H100", memory_used_mib=used_mib, memory_total_mib=81559)])
    return HostReport(name="pod-a", status=HostStatus.OK, facts=Facts(gpu=gpus), findings=list(findings))


def test_only_safe_pod_steps_are_planned_and_every_other_says_why_not():
    planned = plan_host(_host(HF, FABRIC, CLEANUP, RESTART, ADVICE), allow_disruptive=False)

    status = {(s.check, s.run): (s.status, s.reason) for s in planned.steps}
    assert status[("storage.hf-cache", "mkdir -p /workspace/hf")] == ("planned", None)
    assert "--allow-disruptive" in status[("gpu.fabric-manager", "systemctl start nvidia-fabricmanager")][1]
    assert "deletes data" in status[("storage.model-download", "huggingface-cli delete-cache")][1]
    # The step after a skipped one that changes something depends on it.
    assert status[("storage.model-download", "mkdir -p /workspace/x")] == (
        "skipped",
        "an earlier step of this fix is not run",
    )
    assert "your machine" in status[("gpu.driver", "runpodctl restart pod x")][1]
    outcomes = {r.check: (r.outcome, r.reason) for r in planned.results}
    assert outcomes["storage.hf-cache"] == ("planned", None)
    assert outcomes["storage.no-volume"] == ("skipped", "advice only: add one")


def test_allow_disruptive_plans_the_restart_but_never_the_inspect_step():
    planned = plan_host(_host(FABRIC), allow_disruptive=True)
    assert [(s.kind, s.status) for s in planned.steps] == [
        (StepKind.DISRUPTIVE, "planned"),
        (StepKind.INSPECT, "skipped"),
    ]


def test_a_pod_whose_gpu_memory_is_held_gets_no_step():
    planned = plan_host(_host(HF, used_mib=40_000), allow_disruptive=True)
    assert "a job may be running" in planned.refused
    assert {s.status for s in planned.steps} == {"skipped"} and planned.results[0].outcome == "skipped"


def test_outcomes_after_the_re_probe():
    before = _host(HF, FABRIC)
    planned = plan_host(before, allow_disruptive=True)
    ran = planned.model_copy(
        update={
            "steps": [
                s.model_copy(update={"status": "ran", "exit": 0})
                if s.check == "storage.hf-cache" or s.kind is StepKind.DISRUPTIVE
                else s
                for s in planned.steps
            ]
        }
    )
    new = Finding(check="system.shm", severity=Severity.WARN, message="small", subject="/dev/shm")
    after = _host(FABRIC, new)

    results = {r.check: r for r in judge(ran, before, after).results}

    assert results["storage.hf-cache"].outcome == "fixed" and results["storage.hf-cache"].after is None
    assert results["gpu.fabric-manager"].outcome == "still_failing"
    assert results["gpu.fabric-manager"].after is Severity.BLOCK
    assert results["system.shm"].outcome == "new" and results["system.shm"].before is None


def test_a_failed_step_is_failed_whatever_the_re_probe_says():
    before = _host(HF)
    planned = plan_host(before, allow_disruptive=False)
    first, second = planned.steps
    failed = planned.model_copy(
        update={
            "steps": [
                first.model_copy(update={"status": "failed", "exit": 1, "reason": "exited 1"}),
                second.model_copy(update={"status": "skipped", "reason": "an earlier step of this fix failed"}),
            ]
        }
    )
    (result,) = judge(failed, before, _host()).results
    assert result.outcome == "failed" and result.reason == "exited 1"
