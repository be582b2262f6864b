"""`doctor --slurm-health`: ComputeFence as slurmd's HealthCheckProgram (or in a Prolog).

slurmd runs a HealthCheckProgram with only SLURMD_NODENAME and PWD in its environment: no
PATH, no SLURM_CONF. So this sets its own PATH, finds scontrol on it, and judges only the
machine (GPUs, driver, GPU health, disks, /dev/shm), never a job's configuration. On a
machine fault (evaluate.checks.scheduler.machine_faults) it drains its own node with
`Reason="computefence: <check ids>"`, each scontrol call logged to the action log as
`fleet drain` logs its own; once the node passes again it resumes it, but only a
drain whose reason starts with `computefence:`: an administrator's drain stays, as LBNL NHC
leaves what it did not set. In a Prolog it does the same, and its non-zero exit makes
Slurm requeue the job (Slurm keeps the reason of a node already drained). With
`drain=False` it only judges: Slurm drains the node as "Prolog error".
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass

from computefence.errors import ConfigError
from computefence.evaluate.checks.scheduler import machine_faults
from computefence.models import HostReport, HostStatus
from computefence.operations.action_log import ActionLog
from computefence.operations.slurm_nodes import (
    Scontrol,
    drain_command,
    drained,
    logged_call,
    ours,
    reason_for,
    resume_command,
)
from computefence.sources.slurm import SlurmNode, valid_node_name

# What a HealthCheckProgram gets instead of the PATH it lacks; the site's own tools first.
HEALTH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The probe's deadline and each sinfo or scontrol call's: one sinfo, the probe (and 5 s for
# it to answer) and one scontrol take at most 41 s, well inside slurmd's 60 s for the program.
PROBE_DEADLINE_S = 20.0
CALL_TIMEOUT_S = 8.0


def prepare_environment() -> str:
    """Set PATH to HEALTH_PATH and say where scontrol is; ConfigError when it is not there."""
    os.environ["PATH"] = HEALTH_PATH
    found = shutil.which("scontrol")
    if found is None:
        raise ConfigError(f"--slurm-health: scontrol is not on {HEALTH_PATH}; install slurm-client on the node")
    return found


def node_name() -> str:
    """The node this runs on, as slurmd names it (SLURMD_NODENAME), else the host name."""
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not valid_node_name(name):
        raise ConfigError(f"--slurm-health: {name[:60]!r} is no Slurm node name")
    return name


@dataclass(frozen=True)
class HealthAction:
    """What the health check did to its node: drained, resumed, kept (drained already, or by
    someone else), or nothing; with the scontrol call and its answer."""

    outcome: str
    detail: str


def act_on_node(host: HostReport, node: SlurmNode | None, scontrol: Scontrol, log: ActionLog) -> HealthAction:
    """Drain on a machine fault, resume our own drain on a pass; touch nothing else."""
    if host.status is not HostStatus.OK:
        return HealthAction("nothing", f"the probe did not finish ({host.reason}); the node is left as it is")
    if node is None:
        return HealthAction("nothing", "Slurm does not list this node; nothing to drain or resume")
    faults = machine_faults(host)
    if faults:
        checks = sorted({f.check for f in faults})
        if drained(node):
            whose = "already ours" if ours(node) else f"kept, drained by someone else: {node.reason or 'no reason'}"
            return HealthAction("kept", f"{', '.join(checks)} failed; drain {whose}")
        ok, said = logged_call(scontrol, log, node.name, drain_command(node.name, reason_for(checks)))
        if ok:
            return HealthAction("drained", f"{', '.join(checks)} failed: drained with reason {reason_for(checks)!r}")
        return HealthAction("failed", f"{', '.join(checks)} failed, and the drain did not take: {said}")
    if drained(node) and ours(node):
        ok, said = logged_call(scontrol, log, node.name, resume_command(node.name))
        if ok:
            return HealthAction("resumed", f"passed: resumed (the drain was ours: {node.reason})")
        return HealthAction("failed", f"passed, but the resume did not take: {said}")
    if drained(node):
        return HealthAction("kept", f"passed; the drain by someone else stays: {node.reason or 'no reason'}")
    return HealthAction("nothing", "passed")
