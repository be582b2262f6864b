"""GPU health from `nvidia-smi -q -x` (recordings replayed by the fake driver), the fabric
manager in the process table and Xid lines of the kernel log; then the gpu.* health checks
those facts lead to. XML from a driver never seen yields "unknown", never a crash or a block."""

from __future__ import annotations

import pytest

from computefence.evaluate import evaluate_host
from computefence.models import CheckOptions, Severity
from computefence.probe import gpu as gpu_part

HEALTH_CHECKS = {
    "gpu.ecc",
    "gpu.pcie-link",
    "gpu.throttle",
    "gpu.power-limit",
    "gpu.mig",
    "gpu.compute-mode",
    "gpu.fabric-manager",
    "gpu.xid",
}


def _health_findings(facts):
    return {f.check: f for f in evaluate_host(facts, CheckOptions()) if f.check in HEALTH_CHECKS}


def test_healthy_h100x8_with_nvswitch(pod):
    pod.nvidia("h100x8")
    pod.gpu_nodes(8)
    for index in (0, 1, 2, 3, 10, 11):  # numeric order, not name order
        (pod.dev / f"nvidia-nvswitch{index}").touch()
    gpu = pod.run().facts.gpu
    assert gpu.nvswitch_nodes == [str(pod.dev / f"nvidia-nvswitch{i}") for i in (0, 1, 2, 3, 10, 11)]
    assert len(gpu.device_nodes) == 8
    assert gpu.health_error is None and len(gpu.health) == 8
    first = gpu.health[0]
    assert (first.name, first.pci_bus_id, first.ecc_mode) == ("NVIDIA H100 80GB HBM3", "00000000:18:00.0", "Enabled")
    assert (first.pcie_gen_max, first.pcie_width_current, first.pcie_width_max) == (5, 16, 16)
    assert (first.power_limit_w, first.power_limit_default_w) == (700.0, 700.0)
    assert (first.fabric_state, first.fabric_status) == ("Completed", "Success")
    assert first.clock_event_reasons["gpu_idle"] is True and first.clock_event_reasons["hw_slowdown"] is False
    # The XML gave the CUDA version: the plain table was not needed.
    assert gpu.cuda_version == "12.2"


@pytest.mark.parametrize(
    "scenario, check, severity, words",
    [
        ("h100x8", "gpu.fabric-manager", Severity.PASS, "NVSwitch fabric initialised on 8 GPUs"),
        ("h100x8-fabric-manager-stopped", "gpu.fabric-manager", Severity.BLOCK, "state In Progress"),
        ("a100x1-remap-pending", "gpu.ecc", Severity.BLOCK, "a row remap is pending"),
        ("rtx4090x1-driver535", "gpu.pcie-link", Severity.PASS, "full width (x16)"),
        ("rtx4090x1-pcie-x4", "gpu.pcie-link", Severity.WARN, "x4 of x16"),
        ("rtx4090x1-power-capped", "gpu.power-limit", Severity.WARN, "capped at 250 W, 56% of its 450 W default"),
        ("a100x1-mig", "gpu.mig", Severity.WARN, "MIG enabled"),
        ("a100x1-driver470", "gpu.throttle", Severity.WARN, "clocked down by HW slowdown"),
        ("rtx4090x1-driver535", "gpu.throttle", Severity.PASS, "no hardware slowdown"),
        ("a100x1-mig", "gpu.compute-mode", Severity.PASS, "compute mode Default"),
    ],
)
def test_recordings_lead_to_their_findings(pod, scenario, check, severity, words):
    pod.nvidia(scenario)
    finding = _health_findings(pod.run().facts)[check]
    assert finding.severity is severity and words in finding.message, finding


def test_pre_535_throttle_tags_and_power_readings(pod):
    pod.nvidia("a100x1-driver470")
    [health] = pod.run().facts.gpu.health
    assert health.clock_event_reasons["hw_slowdown"] is True and health.clock_event_reasons["gpu_idle"] is False
    assert (health.power_limit_w, health.power_limit_default_w, health.temperature_slowdown_c) == (400.0, 400.0, 89)


def test_mig_mode_leaves_remapped_rows_unknown_not_failed(pod):
    pod.nvidia("a100x1-mig")
    [health] = pod.run().facts.gpu.health
    assert health.remapped_rows_pending is None and health.ecc_volatile_uncorrectable is None
    assert _health_findings(pod.run().facts)["gpu.ecc"].severity is Severity.SKIP


def test_fabric_manager_is_found_in_the_process_table(pod):
    pod.nvidia("h100x8")
    assert pod.run().facts.gpu.fabric_manager_running is False
    (pod.proc / "4242").mkdir()
    (pod.proc / "4242" / "comm").write_text("nv-fabricmanager\n")
    assert pod.run().facts.gpu.fabric_manager_running is True


def test_xid_lines_of_the_kernel_log(pod):
    pod.nvidia("h100x8")
    (pod.dev / "kmsg").write_text(
        "6,1001,5000000,-;nvidia-nvswitch0: open (major=507)\n"
        "4,1002,9000000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=0, name=python, GPU has fallen off the bus.\n"
        "4,1003,9100000,-;NVRM: Xid (PCI:0000:2a:00): 13, pid=1234, Graphics SM Warp Exception\n"
    )
    facts = pod.run().facts
    log = facts.gpu.kernel_log
    assert log.readable and log.source == "/dev/kmsg"
    assert [(e.code, e.pci_bus_id) for e in log.xid_events] == [(79, "0000:18:00"), (13, "0000:2a:00")]
    finding = _health_findings(facts)["gpu.xid"]
    assert finding.severity is Severity.WARN and "Xid 79 (GPU has fallen off the bus)" in finding.message


def test_unreadable_kernel_log_is_said_in_the_facts_never_an_error(pod):
    pod.nvidia("h100x8")
    (pod.proc / "sys" / "kernel").mkdir(parents=True)
    (pod.proc / "sys" / "kernel" / "dmesg_restrict").write_text("1\n")
    run = pod.run()
    log = run.facts.gpu.kernel_log
    assert not log.readable and log.reason.startswith("/dev/kmsg: No such file or directory")
    assert "dmesg_restrict=1" in log.reason and run.facts.collectors["gpu"].ok
    assert _health_findings(run.facts)["gpu.xid"].severity is Severity.SKIP


UNSEEN_DRIVER = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v99.dtd">
<nvidia_smi_log>
    <driver_version>999.01</driver_version>
    <cuda_version>N/A</cuda_version>
    <gpu id="00000000:01:00.0">
        <product_name>N/A</product_name>
        <quantum_entanglement><state>Active</state></quantum_entanglement>
        <ecc_errors><volatile><hbm_uncorrectable>N/A</hbm_uncorrectable></volatile></ecc_errors>
        <remapped_rows>N/A</remapped_rows>
        <clocks_event_reasons><clocks_event_reason_gpu_idle>N/A</clocks_event_reason_gpu_idle></clocks_event_reasons>
        <pci><pci_gpu_link_info><link_widths><current_link_width>N/A</current_link_width></link_widths></pci_gpu_link_info></pci>
        <gpu_power_readings><current_power_limit>[Unknown Error]</current_power_limit></gpu_power_readings>
        <compute_mode>N/A</compute_mode>
        <fabric><state>N/A</state><status>N/A</status></fabric>
    </gpu>
</nvidia_smi_log>
"""


def test_xml_of_an_unseen_driver_is_unknown_never_a_crash_or_a_block():
    [health], driver, cuda = gpu_part._parse_smi_xml(UNSEEN_DRIVER)
    assert (driver, cuda) == ("999.01", None)
    assert health["name"] is None and health["ecc_volatile_uncorrectable"] is None
    assert health["clock_event_reasons"] == {} and health["pcie_width_current"] is None
    assert health["power_limit_w"] is None and health["fabric_state"] is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<nvidia_smi_log>",
        "<html>no</html>",
        "not xml at all",
        '<!DOCTYPE x [<!ENTITY e "boom">]><nvidia_smi_log>&e;</nvidia_smi_log>',
    ],
)
def test_broken_xml_is_a_reason_not_a_crash(text):
    with pytest.raises(ValueError):
        gpu_part._parse_smi_xml(text)


def test_failing_xml_query_keeps_the_gpu_facts_and_says_why(pod, tmp_path):
    pod.nvidia("h100x1")  # recorded without -q -x: the fake refuses it like an unknown option
    facts = pod.run().facts
    gpu = facts.gpu
    assert len(gpu.gpus) == 1 and gpu.health == [] and gpu.cuda_version == "12.4"
    assert gpu.health_error.startswith("nvidia-smi -q -x: ")
    findings = _health_findings(facts)
    assert findings["gpu.ecc"].severity is Severity.SKIP and "GPU health unknown" in findings["gpu.ecc"].message
    assert not any(f.severity in (Severity.WARN, Severity.BLOCK) for f in findings.values())
