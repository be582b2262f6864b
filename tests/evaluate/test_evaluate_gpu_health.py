"""gpu.ecc, gpu.pcie-link, gpu.throttle, gpu.power-limit, gpu.mig, gpu.compute-mode,
gpu.fabric-manager and gpu.xid from health facts shaped like `nvidia-smi -q -x` reports them.
(The recordings themselves go through the probe's parser in tests/probe/test_probe_gpu_health.py.)
Here: what holds across the health checks together; each check's own cases are data in
tests/evaluate/cases/gpu.*/ (tests/evaluate/test_cases.py)."""

from __future__ import annotations

from evaluate_builders import gpus, only, problems, runpod_pod

from computefence.evaluate import evaluate_host
from computefence.models import (
    AccelerateFacts,
    CheckOptions,
    Facts,
    GpuHealth,
    KernelLogFacts,
    Severity,
)

HEALTH_CHECKS = (
    "gpu.ecc",
    "gpu.pcie-link",
    "gpu.throttle",
    "gpu.power-limit",
    "gpu.mig",
    "gpu.compute-mode",
    "gpu.fabric-manager",
    "gpu.xid",
)


def healthy(index: int = 0, **update) -> GpuHealth:
    """An idle H100 SXM on an NVSwitch board, as driver 535 reports it."""
    values = dict(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        pci_bus_id=f"00000000:{0x18 + index:02X}:00.0",
        ecc_mode="Enabled",
        ecc_volatile_uncorrectable=0,
        ecc_volatile_correctable=0,
        ecc_aggregate_uncorrectable=0,
        ecc_aggregate_correctable=0,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        clock_event_reasons={
            "gpu_idle": True,
            "hw_slowdown": False,
            "hw_thermal_slowdown": False,
            "hw_power_brake_slowdown": False,
            "sw_power_cap": False,
        },
        utilization_pct=0,
        processes=0,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        power_draw_w=70.0,
        power_limit_w=700.0,
        power_limit_default_w=700.0,
        power_limit_max_w=700.0,
        temperature_c=30,
        persistence_mode="Enabled",
        compute_mode="Default",
        mig_current="Disabled",
        mig_pending="Disabled",
        fabric_state="Completed",
        fabric_status="Success",
    )
    values.update(update)
    return GpuHealth(**values)


def pod(
    *health: GpuHealth,
    fm_running: bool | None = True,
    nvswitch: int = 0,
    log: KernelLogFacts | None = None,
    accelerate: AccelerateFacts | None = None,
) -> Facts:
    base = runpod_pod(n_gpus=len(health))
    gpu = gpus(len(health)).model_copy(
        update={
            "health": list(health),
            "fabric_manager_running": fm_running,
            "nvswitch_nodes": [f"/dev/nvidia-nvswitch{i}" for i in range(nvswitch)],
            "kernel_log": log or KernelLogFacts(readable=True, source="/dev/kmsg"),
        }
    )
    return base.model_copy(update={"gpu": gpu, "accelerate": accelerate or base.accelerate})


def test_healthy_h100x8_passes_every_health_check():
    findings = [
        f
        for f in evaluate_host(pod(*(healthy(i) for i in range(8)), nvswitch=6), CheckOptions())
        if f.check in HEALTH_CHECKS
    ]
    assert sorted(f.check for f in findings) == sorted(HEALTH_CHECKS)
    assert problems(findings) == []
    assert only(findings, "gpu.fabric-manager").message == "NVSwitch fabric initialised on 8 GPUs"
    assert only(findings, "gpu.pcie-link").message == "PCIe links at full width (x16)"


# ---------------------------------------------------------------- what the driver does not say


def test_n_a_everywhere_is_unknown_never_a_block():
    blank = GpuHealth(index=0)
    findings = [
        f
        for f in evaluate_host(pod(blank, fm_running=None, log=KernelLogFacts(reason="unreadable")), CheckOptions())
        if f.check in HEALTH_CHECKS
    ]
    assert problems(findings) == []
    for check in ("gpu.ecc", "gpu.pcie-link", "gpu.throttle", "gpu.power-limit", "gpu.compute-mode", "gpu.xid"):
        assert only(findings, check).severity is Severity.SKIP, check
    assert "unknown" in only(findings, "gpu.ecc").message and "unknown" in only(findings, "gpu.pcie-link").message


def test_no_health_facts_says_why_once():
    facts = pod(healthy())
    facts = facts.model_copy(
        update={
            "gpu": facts.gpu.model_copy(
                update={"health": [], "health_error": "nvidia-smi -q -x did not answer within 8.0s"}
            )
        }
    )
    findings = [f for f in evaluate_host(facts, CheckOptions()) if f.check in HEALTH_CHECKS]
    assert [(f.check, f.message) for f in findings if f.check != "gpu.xid"] == [
        ("gpu.ecc", "GPU health unknown: nvidia-smi -q -x did not answer within 8.0s")
    ]
