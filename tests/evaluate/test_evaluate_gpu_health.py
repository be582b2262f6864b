"""gpu.ecc, gpu.pcie-link, gpu.throttle, gpu.power-limit, gpu.mig, gpu.compute-mode,
gpu.fabric-manager and gpu.xid from health facts shaped like `nvidia-smi -q -x` reports them.
(The recordings themselves go through the probe's parser in tests/probe/test_probe_gpu_health.py.)"""

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
    XidEvent,
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


def _findings(facts: Facts, check: str):
    return [f for f in evaluate_host(facts, CheckOptions()) if f.check == check]


def _one(facts: Facts, check: str):
    return only(evaluate_host(facts, CheckOptions()), check)


def test_healthy_h100x8_passes_every_health_check():
    findings = [
        f
        for f in evaluate_host(pod(*(healthy(i) for i in range(8)), nvswitch=6), CheckOptions())
        if f.check in HEALTH_CHECKS
    ]
    assert sorted(f.check for f in findings) == sorted(HEALTH_CHECKS)
    assert problems(findings) == []
    assert only(findings, "gpu.fabric-manager").message == "NVSwitch fabric initialised on 8 GPU(s)"
    assert only(findings, "gpu.pcie-link").message == "PCIe links at full width (x16)"


# ---------------------------------------------------------------- gpu.ecc


def test_pending_remap_blocks_naming_the_gpu_and_its_faults():
    bad = healthy(1, ecc_volatile_uncorrectable=1, remapped_rows_uncorrectable=1, remapped_rows_pending=True)
    finding = _one(pod(healthy(0), bad), "gpu.ecc")
    assert finding.severity is Severity.BLOCK and finding.subject == "GPU 1"
    assert "1 uncorrectable ECC error(s) since the driver loaded; a row remap is pending" in finding.message
    assert (
        finding.fix.commands == ["runpodctl stop pod a1b2c3d4e5f6 && runpodctl start pod a1b2c3d4e5f6"]
        and "next GPU reset" in finding.fix.advice
    )


def test_failed_remap_and_pending_retirement_block_as_failing_memory():
    failed = _one(pod(healthy(remapped_rows_failure=True)), "gpu.ecc")
    assert failed.severity is Severity.BLOCK and "a row remap failed" in failed.message
    assert "memory is failing" in failed.fix.advice
    retiring = healthy(
        remapped_rows_pending=None, remapped_rows_failure=None, retired_pages=2, retired_pages_pending=True
    )
    assert "pages are pending retirement" in _one(pod(retiring), "gpu.ecc").message


def test_correctable_errors_alone_pass():
    assert (
        _one(pod(healthy(ecc_volatile_correctable=12, remapped_rows_correctable=3)), "gpu.ecc").severity
        is Severity.PASS
    )


def test_bare_metal_ecc_fix_resets_that_gpu():
    facts = pod(healthy(remapped_rows_pending=True))
    facts = facts.model_copy(
        update={"identity": facts.identity.model_copy(update={"provider_hints": {}, "uid": 1000, "user": "ubuntu"})}
    )
    assert _one(facts, "gpu.ecc").fix.commands == ["sudo nvidia-smi -r -i 0"]


# ---------------------------------------------------------------- gpu.pcie-link


def test_x4_link_warns_and_x1_blocks_while_a_lower_gen_is_ignored():
    x4 = _one(
        pod(healthy(name="NVIDIA GeForce RTX 4090", pcie_width_current=4, pcie_gen_current=1, pcie_gen_max=4)),
        "gpu.pcie-link",
    )
    assert x4.severity is Severity.WARN and "x4 of x16" in x4.message and x4.subject == "GPU 0"
    assert x4.fix.commands == ["nvidia-smi --query-gpu=index,pcie.link.width.current,pcie.link.width.max --format=csv"]
    x1 = _one(pod(healthy(pcie_width_current=1)), "gpu.pcie-link")
    assert x1.severity is Severity.BLOCK
    idle_gen = _one(pod(healthy(pcie_gen_current=1)), "gpu.pcie-link")
    assert idle_gen.severity is Severity.PASS


# ---------------------------------------------------------------- gpu.throttle


def test_hardware_slowdown_on_an_idle_gpu_warns():
    reasons = {"gpu_idle": True, "hw_slowdown": True, "hw_thermal_slowdown": True, "hw_power_brake_slowdown": False}
    finding = _one(pod(healthy(clock_event_reasons=reasons, temperature_c=91)), "gpu.throttle")
    assert finding.severity is Severity.WARN
    assert "idle at 91 C yet clocked down by HW slowdown, HW thermal slowdown" in finding.message
    assert finding.fix.commands[0] == "nvidia-smi -q -i 0 -d PERFORMANCE,TEMPERATURE,POWER"


def test_slowdown_under_load_and_software_power_cap_are_not_judged():
    busy = healthy(clock_event_reasons={"hw_slowdown": True}, utilization_pct=97, processes=1)
    assert _one(pod(busy), "gpu.throttle").severity is Severity.PASS
    capped = healthy(clock_event_reasons={"sw_power_cap": True, "hw_slowdown": False})
    assert _one(pod(capped), "gpu.throttle").severity is Severity.PASS


# ---------------------------------------------------------------- gpu.power-limit


def test_power_cap_under_85_percent_of_default_warns_with_the_watts():
    finding = _one(
        pod(healthy(name="NVIDIA GeForce RTX 4090", power_limit_w=250.0, power_limit_default_w=450.0)),
        "gpu.power-limit",
    )
    assert finding.severity is Severity.WARN and "capped at 250 W, 56% of its 450 W default" in finding.message
    assert finding.fix.commands == ["nvidia-smi -i 0 -pl 450"] and finding.fix.advice.startswith(
        "only the host can raise it"
    )
    near = _one(pod(healthy(power_limit_w=600.0, power_limit_default_w=700.0)), "gpu.power-limit")
    assert near.severity is Severity.PASS


# ---------------------------------------------------------------- gpu.mig and gpu.compute-mode


def test_mig_enabled_or_pending_warns():
    enabled = _one(pod(healthy(name="NVIDIA A100-SXM4-40GB", mig_current="Enabled", mig_pending="Enabled")), "gpu.mig")
    assert enabled.severity is Severity.WARN and "MIG enabled" in enabled.message
    assert enabled.fix.commands == ["nvidia-smi -i 0 -mig 0"]
    pending = _one(pod(healthy(mig_pending="Enabled")), "gpu.mig")
    assert "pending (enabled at the next GPU reset)" in pending.message


def test_prohibited_compute_mode_blocks():
    finding = _one(pod(healthy(0), healthy(1, compute_mode="Prohibited")), "gpu.compute-mode")
    assert finding.severity is Severity.BLOCK and finding.subject == "GPU 1" and "Prohibited" in finding.message
    assert finding.fix.commands == ["nvidia-smi -i 1 -c DEFAULT"]


def test_exclusive_process_blocks_only_with_more_processes_than_gpus():
    exclusive = [healthy(i, compute_mode="Exclusive_Process") for i in range(2)]
    crowded = AccelerateFacts(found=True, path="/root/default_config.yaml", config={"num_processes": 4})
    finding = _one(pod(*exclusive, accelerate=crowded), "gpu.compute-mode")
    assert finding.severity is Severity.BLOCK and "starts 4 processes for 2 GPU(s)" in finding.message
    one_each = AccelerateFacts(found=True, path="/root/default_config.yaml", config={"num_processes": 2})
    assert _one(pod(*exclusive, accelerate=one_each), "gpu.compute-mode").severity is Severity.PASS


# ---------------------------------------------------------------- gpu.fabric-manager


def test_fabric_in_progress_blocks_and_a_rented_pod_is_restarted_not_reinstalled():
    stuck = [healthy(i, fabric_state="In Progress", fabric_status=None) for i in range(8)]
    finding = _one(pod(*stuck, fm_running=False, nvswitch=4), "gpu.fabric-manager")
    assert finding.severity is Severity.BLOCK
    assert "state In Progress" in finding.message and "nv-fabricmanager is not running" in finding.message
    assert "error 802" in finding.message and "pip" not in finding.fix.as_text()
    assert finding.fix.commands == ["runpodctl stop pod a1b2c3d4e5f6 && runpodctl start pod a1b2c3d4e5f6"]


def test_fabric_manager_on_bare_metal_is_started():
    facts = pod(*(healthy(i, fabric_state="Not Started") for i in range(2)), fm_running=False)
    facts = facts.model_copy(update={"identity": facts.identity.model_copy(update={"provider_hints": {}})})
    assert _one(facts, "gpu.fabric-manager").fix.commands == [
        "systemctl start nvidia-fabricmanager",
        "nvidia-smi -q | grep -A 2 -i fabric",
    ]


def test_old_driver_nvswitch_board_without_fabric_manager_blocks():
    old = [healthy(i, fabric_state=None, fabric_status=None) for i in range(8)]
    finding = _one(pod(*old, fm_running=False, nvswitch=6), "gpu.fabric-manager")
    assert finding.severity is Severity.BLOCK and "6 switch node(s)" in finding.message


def test_completed_fabric_passes_even_when_the_container_cannot_see_the_host_process():
    assert _one(pod(healthy(), fm_running=False), "gpu.fabric-manager").severity is Severity.PASS


def test_no_nvswitch_no_fabric_finding():
    pcie = healthy(fabric_state=None, fabric_status=None)
    assert _findings(pod(pcie, fm_running=False), "gpu.fabric-manager") == []


# ---------------------------------------------------------------- gpu.xid


def test_serious_xids_warn_and_others_pass():
    log = KernelLogFacts(
        readable=True,
        source="/dev/kmsg",
        xid_events=[
            XidEvent(
                code=79,
                pci_bus_id="0000:18:00",
                line="NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.",
            ),
            XidEvent(code=13, pci_bus_id="0000:2a:00", line="NVRM: Xid (PCI:0000:2a:00): 13, Graphics Exception"),
        ],
    )
    finding = _one(pod(healthy(), log=log), "gpu.xid")
    assert finding.severity is Severity.WARN
    assert finding.message.startswith("kernel log shows Xid 79 (GPU has fallen off the bus) on PCI 0000:18:00")
    benign = KernelLogFacts(readable=True, source="/dev/kmsg", xid_events=log.xid_events[1:])
    passed = _one(pod(healthy(), log=benign), "gpu.xid")
    assert passed.severity is Severity.PASS and "(1 other Xid line(s))" in passed.message


def test_unreadable_kernel_log_is_a_note_not_an_error():
    log = KernelLogFacts(readable=False, reason="dmesg_restrict=1: reading it needs CAP_SYSLOG")
    finding = _one(pod(healthy(), log=log), "gpu.xid")
    assert finding.severity is Severity.SKIP and "needs CAP_SYSLOG" in finding.message


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
