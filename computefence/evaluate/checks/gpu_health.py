"""GPU health: the GPU that is there but degraded, throttled, on a narrow link, partitioned,
locked, or not wired up, from `nvidia-smi -q -x` and the kernel log.

A check whose facts the driver did not report (N/A, an older driver, a section missing)
passes with "unknown" rather than guessing; with no health facts at all (nvidia-smi -q -x
failed) only gpu.ecc says so, once. Facts from a probe that collects none stay silent.
"""

from __future__ import annotations

from collections.abc import Callable

from computefence.evaluate.context import Context, Rule, block, passed, skipped, sudo, warn
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import CheckOptions, Facts, Finding, Fix, FixStep, GpuHealth, StepKind
from computefence.text import plural

CHECKS: dict[str, CheckSpec] = {
    "gpu.ecc": CheckSpec(
        "no uncorrectable memory errors, pending or failed row remaps, or pages pending retirement", Remedy.REPLACE
    ),
    "gpu.pcie-link": CheckSpec("every GPU's PCIe link runs at its full width", Remedy.REPLACE),
    "gpu.throttle": CheckSpec("no hardware slowdown, thermal or power-brake throttling on an idle GPU", Remedy.REPLACE),
    "gpu.power-limit": CheckSpec("the enforced power limit is at least 85% of the default", Remedy.REPLACE),
    "gpu.mig": CheckSpec("MIG is off, so the job gets whole GPUs", Remedy.REPLACE),
    "gpu.compute-mode": CheckSpec("the compute mode lets the job's processes use the GPUs", Remedy.REPLACE),
    "gpu.fabric-manager": CheckSpec(
        "an NVSwitch system's fabric is initialised by a running fabric manager", Remedy.REPLACE
    ),
    "gpu.xid": CheckSpec("no Xid errors of failing hardware in the recent kernel log", Remedy.REPLACE),
}

# An enforced power limit under this share of the default is a capped card.
POWER_LIMIT_SHARE = 0.85
# Above this utilisation a GPU is working, and slowing down under load is expected.
IDLE_UTILIZATION_PCT = 10
# Clock event reasons that on an idle GPU mean the host, not the load, slows it down.
HARDWARE_SLOWDOWNS = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
}
# Xids of hardware that is failing (NVIDIA's Xid catalogue).
XID_MEANINGS = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remap",
    64: "ECC page retirement or row remap failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
}
FABRIC_DONE = "completed"


def _label(gpus: list[GpuHealth]) -> str:
    return "GPU " + ",".join(str(g.index) for g in gpus)


def _move_on(ctx: Context, what: str) -> tuple[list[FixStep], str]:
    """The provider's restart command where there is one, and the advice to move on."""
    restart = ctx.restart_command()
    if ctx.on_provider:
        advice = f"{what}: restart the {ctx.profile.title} machine; if it persists, move to another machine"
        return ([FixStep.local(restart, StepKind.DISRUPTIVE)] if restart else []), advice
    return [], f"{what}: reboot the machine; if it persists, the GPU or its slot is faulty"


def _gpu_finding(
    make: Callable[..., Finding], cid: str, gpu: GpuHealth, message: str, steps: list[FixStep], advice: str
) -> Finding:
    """`make` (warn or block): a finding about one GPU, its subject that GPU."""
    return make(cid, message, Fix(steps=steps, advice=advice), subject=f"GPU {gpu.index}")


def _health_rule(cid: str, judge: Callable[[Facts, Context, list[GpuHealth]], list[Finding]]) -> Rule:
    def rule(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
        if not ctx.gpu_usable or not facts.gpu.health:
            return []
        return judge(facts, ctx, facts.gpu.health)

    rule.__name__ = "check_" + cid.split(".", 1)[1].replace("-", "_")
    return rule


# ---------------------------------------------------------------- gpu.ecc


def check_ecc(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.ecc"
    if not ctx.gpu_usable:
        return []
    health = facts.gpu.health
    if not health:
        # No health_error either: a probe that does not collect health (an older one).
        return [skipped(cid, f"GPU health unknown: {facts.gpu.health_error}")] if facts.gpu.health_error else []
    findings = []
    for gpu in health:
        faults = _memory_faults(gpu)
        if not faults:
            continue
        failing = gpu.remapped_rows_failure or (gpu.retired_pages_pending and not gpu.remapped_rows_pending)
        commands, advice = _move_on(
            ctx,
            "the GPU's memory is failing; tell the provider"
            if failing
            else "a pending remap or retirement takes effect only at the next GPU reset, and until "
            "then the job can hit the bad memory",
        )
        if not ctx.on_provider:
            commands = [FixStep.disruptive(f"{sudo(facts)}nvidia-smi -r -i {gpu.index}")]
        message = f"GPU {gpu.index} ({gpu.name or '?'}): {'; '.join(faults)}"
        findings.append(_gpu_finding(block, cid, gpu, message, commands, advice))
    if findings:
        return findings
    unknown = [
        g
        for g in health
        if g.ecc_volatile_uncorrectable is None and g.remapped_rows_pending is None and g.retired_pages_pending is None
    ]
    if len(unknown) == len(health):
        return [skipped(cid, "memory error counts unknown: the driver reports them as N/A (ECC off or not supported)")]
    return [
        passed(cid, f"no uncorrectable memory errors or pending remaps on {plural(len(health) - len(unknown), 'GPU')}")
    ]


def _memory_faults(gpu: GpuHealth) -> list[str]:
    faults = []
    if gpu.ecc_volatile_uncorrectable:
        faults.append(f"{plural(gpu.ecc_volatile_uncorrectable, 'uncorrectable ECC error')} since the driver loaded")
    if gpu.remapped_rows_failure:
        faults.append("a row remap failed")
    if gpu.remapped_rows_pending:
        faults.append("a row remap is pending")
    if gpu.retired_pages_pending:
        faults.append("pages are pending retirement")
    return faults


# ---------------------------------------------------------------- gpu.pcie-link


def _judge_pcie(facts: Facts, ctx: Context, health: list[GpuHealth]) -> list[Finding]:
    cid = "gpu.pcie-link"
    known = [g for g in health if g.pcie_width_current and g.pcie_width_max]
    if not known:
        return [skipped(cid, "PCIe link width unknown: the driver does not report it")]
    # Link generation is not compared: GPUs drop it at idle to save power.
    narrow = [g for g in known if (g.pcie_width_current or 0) < (g.pcie_width_max or 0)]
    if not narrow:
        widths = sorted({g.pcie_width_max or 0 for g in known})
        return [passed(cid, f"PCIe links at full width (x{'/x'.join(str(w) for w in widths)})")]
    findings = []
    for gpu in narrow:
        make = block if (gpu.pcie_width_current or 0) <= 1 else warn
        message = (
            f"GPU {gpu.index} ({gpu.name or '?'}) runs its PCIe link at x{gpu.pcie_width_current} of "
            f"x{gpu.pcie_width_max}: host-device copies and data loading run at "
            f"{gpu.pcie_width_current}/{gpu.pcie_width_max} of the speed"
        )
        advice = (
            "the card sits in a slot or riser wired narrower than the card; no setting on the pod widens it: "
            "choose another machine (on Vast, compare the offers' PCIe bandwidth)"
        )
        command = "nvidia-smi --query-gpu=index,pcie.link.width.current,pcie.link.width.max --format=csv"
        findings.append(_gpu_finding(make, cid, gpu, message, [FixStep.inspect(command)], advice))
    return findings


# ---------------------------------------------------------------- gpu.throttle


def _idle(gpu: GpuHealth) -> bool:
    return (gpu.utilization_pct is None or gpu.utilization_pct <= IDLE_UTILIZATION_PCT) and not gpu.processes


def _judge_throttle(facts: Facts, ctx: Context, health: list[GpuHealth]) -> list[Finding]:
    cid = "gpu.throttle"
    known = [g for g in health if g.clock_event_reasons]
    if not known:
        return [skipped(cid, "clock event reasons unknown: the driver does not report them")]
    findings = []
    for gpu in known:
        active = [label for key, label in HARDWARE_SLOWDOWNS.items() if gpu.clock_event_reasons.get(key)]
        if not active or not _idle(gpu):
            continue
        temperature = f" at {gpu.temperature_c} C" if gpu.temperature_c is not None else ""
        message = (
            f"GPU {gpu.index} ({gpu.name or '?'}) is idle{temperature} yet clocked down by "
            f"{', '.join(active)}: it will run slower than it should under load"
        )
        commands, advice = _move_on(
            ctx, "on an idle GPU this points at the host (cooling, power supply or its power-brake signal)"
        )
        inspect = FixStep.inspect(f"nvidia-smi -q -i {gpu.index} -d PERFORMANCE,TEMPERATURE,POWER")
        findings.append(_gpu_finding(warn, cid, gpu, message, [inspect, *commands], advice))
    if findings:
        return findings
    return [passed(cid, "no hardware slowdown, thermal or power-brake throttling on an idle GPU")]


# ---------------------------------------------------------------- gpu.power-limit


def _judge_power(facts: Facts, ctx: Context, health: list[GpuHealth]) -> list[Finding]:
    cid = "gpu.power-limit"
    known = [g for g in health if g.power_limit_w and g.power_limit_default_w]
    if not known:
        return [skipped(cid, "power limits unknown: the driver does not report them")]
    capped = [g for g in known if (g.power_limit_w or 0) < POWER_LIMIT_SHARE * (g.power_limit_default_w or 0)]
    if not capped:
        return [
            passed(
                cid,
                "enforced power limits at their defaults ("
                + ", ".join(sorted({f"{g.power_limit_w:.0f} W" for g in known}))
                + ")",
            )
        ]
    findings = []
    for gpu in capped:
        share = (gpu.power_limit_w or 0) / (gpu.power_limit_default_w or 1)
        message = (
            f"GPU {gpu.index} ({gpu.name or '?'}) is capped at {gpu.power_limit_w:.0f} W, {share:.0%} of its "
            f"{gpu.power_limit_default_w:.0f} W default: expect lower clocks under load"
        )
        advice = "only the host can raise it (a container cannot): ask the provider, or choose another machine"
        restore = FixStep.disruptive(f"{sudo(facts)}nvidia-smi -i {gpu.index} -pl {gpu.power_limit_default_w:.0f}")
        findings.append(_gpu_finding(warn, cid, gpu, message, [restore], advice))
    return findings


# ---------------------------------------------------------------- gpu.mig


def _enabled(value: str | None) -> bool:
    return (value or "").strip().lower() == "enabled"


def _judge_mig(facts: Facts, ctx: Context, health: list[GpuHealth]) -> list[Finding]:
    cid = "gpu.mig"
    mig = [g for g in health if _enabled(g.mig_current) or _enabled(g.mig_pending)]
    if not mig:
        return [passed(cid, "MIG is off: the job gets whole GPUs")]
    findings = []
    for gpu in mig:
        state = "enabled" if _enabled(gpu.mig_current) else "pending (enabled at the next GPU reset)"
        message = (
            f"GPU {gpu.index} ({gpu.name or '?'}) has MIG {state}: the job sees GPU slices, not the whole GPU, "
            "and NCCL cannot span them"
        )
        advice = (
            "then reset the GPU; a container cannot change MIG mode: choose a machine without MIG, "
            "or ask the provider to disable it"
        )
        disable = FixStep.disruptive(f"{sudo(facts)}nvidia-smi -i {gpu.index} -mig 0")
        findings.append(_gpu_finding(warn, cid, gpu, message, [disable], advice))
    return findings


# ---------------------------------------------------------------- gpu.compute-mode


def _processes_per_node(facts: Facts) -> int | None:
    value = facts.accelerate.config.get("num_processes") if facts.accelerate.found else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _judge_compute_mode(facts: Facts, ctx: Context, health: list[GpuHealth]) -> list[Finding]:
    cid = "gpu.compute-mode"
    known = [g for g in health if g.compute_mode]
    if not known:
        return [skipped(cid, "compute mode unknown: the driver does not report it")]
    prohibited = [g for g in known if (g.compute_mode or "").lower() == "prohibited"]
    exclusive = [g for g in known if (g.compute_mode or "").lower() in ("exclusive_process", "exclusive_thread")]
    processes = _processes_per_node(facts)
    crowded = exclusive if processes is not None and processes > len(health) else []
    findings = []
    for gpus, message in (
        (prohibited, "compute mode Prohibited: no process can create a CUDA context on {gpus}"),
        (
            crowded,
            f"compute mode Exclusive_Process on {{gpus}}, but the accelerate config starts {processes} "
            f"processes for {plural(len(health), 'GPU')}: the processes sharing a GPU fail to start",
        ),
    ):
        if gpus:
            commands = [FixStep.disruptive(f"{sudo(facts)}nvidia-smi -i {g.index} -c DEFAULT") for g in gpus]
            findings.append(
                block(
                    cid,
                    message.format(gpus=_label(gpus)),
                    Fix(
                        steps=commands,
                        advice="a container cannot change the compute mode: ask the provider, or choose another machine",
                    ),
                    subject=_label(gpus),
                )
            )
    if findings:
        return findings
    modes = ", ".join(sorted({g.compute_mode or "" for g in known}))
    return [passed(cid, f"compute mode {modes}")]


# ---------------------------------------------------------------- gpu.fabric-manager


def _fabric_ok(gpu: GpuHealth) -> bool:
    state_done = (gpu.fabric_state or "").lower() == FABRIC_DONE
    return state_done and (gpu.fabric_status is None or gpu.fabric_status.lower() == "success")


def check_fabric_manager(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.fabric-manager"
    gpu = facts.gpu
    if not ctx.gpu_usable:
        return []
    reporting = [g for g in gpu.health if g.fabric_state is not None]
    if not reporting and not gpu.nvswitch_nodes:
        return []  # not an NVSwitch system
    unready = [g for g in reporting if not _fabric_ok(g)]
    fm_down = gpu.fabric_manager_running is False
    if reporting and not unready:
        return [passed(cid, f"NVSwitch fabric initialised on {plural(len(reporting), 'GPU')}")]
    if not unready and not fm_down:
        return [passed(cid, "NVSwitch system with nv-fabricmanager running")]
    if unready:
        first = unready[0]
        state = (first.fabric_state or "") + (f", status {first.fabric_status}" if first.fabric_status else "")
        message = f"NVSwitch fabric not initialised on {_label(unready)} (state {state})" + (
            "; nv-fabricmanager is not running" if fm_down else ""
        )
    else:
        message = (
            f"NVSwitch system ({plural(len(gpu.nvswitch_nodes), 'switch node')}) but nv-fabricmanager is not running"
        )
    message += ": CUDA fails with error 802 'system not yet initialized'"
    if ctx.on_provider:
        commands, advice = _move_on(ctx, "only the host can start the fabric manager")
    else:
        root = sudo(facts)
        commands = [
            FixStep.disruptive(f"{root}systemctl start nvidia-fabricmanager"),
            FixStep.inspect("nvidia-smi -q | grep -A 2 -i fabric"),
        ]
        advice = (
            "install nvidia-fabricmanager of the driver's exact version if the service is missing; "
            "reinstalling torch cannot help"
        )
    return [block(cid, message, Fix(steps=commands, advice=advice))]


# ---------------------------------------------------------------- gpu.xid


def check_xid(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.xid"
    if not ctx.gpu_usable:
        return []
    log = facts.gpu.kernel_log
    if not log.readable:
        # No reason either: a probe that does not read the kernel log (an older one).
        return [skipped(cid, f"kernel log not checked for Xid errors: {log.reason}")] if log.reason else []
    serious = [event for event in log.xid_events if event.code in XID_MEANINGS]
    if not serious:
        seen = f" ({plural(len(log.xid_events), 'other Xid line')})" if log.xid_events else ""
        return [passed(cid, f"no Xid errors of failing hardware in {log.source or 'the kernel log'}{seen}")]
    codes = sorted({event.code for event in serious})
    listed = "; ".join(f"Xid {code} ({XID_MEANINGS[code]})" for code in codes)
    devices = sorted({event.pci_bus_id for event in serious if event.pci_bus_id})
    where = f" on PCI {', '.join(devices)}" if devices else ""
    commands, advice = _move_on(ctx, "these Xids come from failing GPU memory, NVLink or a GPU dropping off the bus")
    return [
        warn(
            cid,
            f"kernel log shows {listed}{where}: the job may die hours in",
            Fix(steps=[FixStep.inspect(f"{sudo(facts)}dmesg | grep -i xid | tail -n 20"), *commands], advice=advice),
        )
    ]


RULES = [
    check_ecc,
    _health_rule("gpu.pcie-link", _judge_pcie),
    _health_rule("gpu.throttle", _judge_throttle),
    _health_rule("gpu.power-limit", _judge_power),
    _health_rule("gpu.mig", _judge_mig),
    _health_rule("gpu.compute-mode", _judge_compute_mode),
    check_fabric_manager,
    check_xid,
]
