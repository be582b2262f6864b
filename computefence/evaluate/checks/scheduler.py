"""What the machine owes its scheduler or provider, and what a Slurm node's state calls for.

`gpu.missing`: the GPUs a provider lists for the machine, or a Slurm node's GRES, are the
GPUs its driver must show; fewer is a machine fault (a GPU fallen off the bus, a dead
board), answered by another machine or, on Slurm, by draining the node.

`machine_faults` says which blockers of a host put a Slurm node out of service (`fleet
drain`, `doctor --slurm-health`): what only the machine's owner can mend (Remedy.REPLACE),
and a wedged driver, which on a pod is a restart but on a Slurm node is a drain and a
reboot. Never a blocker of the job's own making (its policy's hardware, its packages).
"""

from __future__ import annotations

import shlex

from computefence.evaluate.context import Context, Rule, block, passed, skipped
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import (
    CheckOptions,
    Facts,
    Finding,
    Fix,
    FixStep,
    HostReport,
    HostStatus,
    Severity,
    Target,
)
from computefence.text import plural

CHECKS: dict[str, CheckSpec] = {
    "gpu.missing": CheckSpec(
        "the driver shows every GPU the provider lists or the Slurm node's GRES declares", Remedy.REPLACE
    ),
}

# Checks that judge only the machine: what a Slurm health check runs (`doctor
# --slurm-health`). No check of the job's configuration, its packages or its data, and none
# that a running job trips (GPU memory in use).
MACHINE_CHECKS: tuple[str, ...] = (
    "gpu.driver",
    "gpu.missing",
    "gpu.ecc",
    "gpu.pcie-link",
    "gpu.throttle",
    "gpu.power-limit",
    "gpu.fabric-manager",
    "gpu.xid",
    "storage.disk-headroom",
    "system.shm",
)
# Blockers that take a Slurm node out of service, beside every Remedy.REPLACE one. The
# policy's hardware is the job's wish, not the machine's fault.
_DRAIN_TOO = frozenset({"gpu.driver"})
_NEVER_DRAIN = frozenset({"policy.hardware"})


def check_missing(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.missing"
    listed = ctx.provider.gpu_count if ctx.provider is not None else None
    if not listed:
        return []  # nothing lists its GPUs: nothing to compare with
    if not ctx.gpu_usable:
        return [skipped(cid, "the driver lists no GPUs (gpu.driver says why)")]
    seen = len(facts.gpu.gpus)
    whose = "Slurm's GRES for this node" if ctx.profile.name == "slurm" else f"{ctx.profile.title}'s listing"
    if seen >= listed:
        return [passed(cid, f"the driver shows all {plural(listed, 'GPU')} of {whose}")]
    message = f"the driver shows {plural(seen, 'GPU')}, {whose} has {listed}: {listed - seen} missing"
    if ctx.profile.name == "slurm":
        fix = Fix(
            steps=[FixStep.inspect("nvidia-smi -L"), FixStep.inspect("dmesg | grep -iE 'NVRM|Xid' | tail -n 20")],
            advice="a GPU has fallen off the bus or failed: drain the node "
            "(computefence fleet drain --from REPORT) and have its hardware looked at",
        )
    else:
        fix = Fix(
            steps=[FixStep.inspect("nvidia-smi -L")],
            advice=f"the machine lacks GPUs it is billed for: move to another one and tell {ctx.profile.title}",
        )
    return [block(cid, message, fix, subject="gpu")]


RULES: list[Rule] = [check_missing]


def slurm_status_fix(target: Target, status: HostStatus, detail: str | None = None) -> Fix | None:
    """What to run for a Slurm node whose step ended in `status`, from a login node."""
    node = shlex.quote(target.host)
    # The probe run by hand in a step of its own shows its own error, as the run saw it.
    by_hand = FixStep.local(f"computefence probe --print | srun --nodelist={node} --nodes=1 --ntasks=1 python3 -")
    if status is HostStatus.OK:
        return None
    if status is HostStatus.NOT_CHECKABLE:
        if target.unreachable_fix:
            return target.unreachable_fix
        if detail == "busy":
            return Fix(
                steps=[FixStep.local(f"squeue --nodelist={node}")],
                advice="jobs hold the node's resources; check it when they end, or give a longer --immediate",
            )
        return Fix(
            steps=[FixStep.local(f"sinfo -R --nodes {node}"), FixStep.local(f"scontrol show node {node}")],
            advice="Slurm would not start a step on the node: its state, a reservation, or your account's limits",
        )
    if status is HostStatus.UNREACHABLE:
        return Fix(
            steps=[FixStep.local(f"scontrol show node {node}"), FixStep.local("scontrol ping")],
            advice="the node's slurmd did not take the step: check slurmd on the node "
            "(systemctl status slurmd); Slurm marks it down once SlurmdTimeout passes",
        )
    if status is HostStatus.TIMEOUT:
        return Fix(
            steps=[by_hand], advice="shows where the probe stalls on the node; a wedged driver often hangs nvidia-smi"
        )
    if status is HostStatus.NO_PYTHON:
        return Fix(advice="the probe needs python3 on the node's PATH in a job step; install it on the node image")
    if status is HostStatus.CANCELLED:
        return Fix(advice="rerun the check; it was cancelled before this node finished")
    return Fix(steps=[by_hand], advice="shows the probe's own error")


def machine_faults(host: HostReport) -> list[Finding]:
    """The host's blockers that put a Slurm node out of service."""
    return [
        f
        for f in host.findings
        if f.severity is Severity.BLOCK
        and f.check not in _NEVER_DRAIN
        and (f.remedy is Remedy.REPLACE or f.check in _DRAIN_TOO)
    ]
