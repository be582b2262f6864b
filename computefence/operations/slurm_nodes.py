"""Drain the Slurm nodes a saved report finds at fault, and return them to service once proven.

As LBNL NHC does: a drain says who set it (`Reason="computefence: <check ids>"`), and only
such drains are ever lifted. A node drained or downed by anyone else is left as it is, its
reason kept. Both actions re-read the nodes' states (sinfo) just before acting, skip what is
already done (so a second run changes nothing), log each scontrol call to the action log
before and after it is made, and prove the result by reading the state again.

`resume` proves a node healthy before returning it: a drained node runs no job step, not
even root's in a maintenance reservation (measured on 22.05), so it

1. holds the node in a maintenance reservation that only this user may use;
2. lifts the drain (the reservation keeps every other job off the node);
3. probes the node inside the reservation and judges only the machine;
4. deletes the reservation if the node passes; otherwise drains it again with its reason,
   then deletes the reservation.

Every scontrol call is an argv (no shell); a node name or check id read from the report is
used only if the cluster lists that node now and the evaluator knows that check.
"""

from __future__ import annotations

import os
import pwd
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from computefence import evaluate, run
from computefence.connectors.slurm import SlurmConnector, SlurmOptions
from computefence.evaluate.checks.scheduler import MACHINE_CHECKS, machine_faults
from computefence.models import HostReport, HostStatus, NodeAction, NodeActionReport, Report
from computefence.operations.action_log import ActionLog
from computefence.session import open_session
from computefence.sources.slurm import SlurmNode, SlurmSource, node_target, valid_node_name
from computefence.sources.tools import ToolOverflow, ToolTimeout, run_tool
from computefence.text import one_line, plural

OURS = "computefence:"
SCONTROL_TIMEOUT_S = 30.0
# What an update or a reservation call answers is a line or two.
SCONTROL_MAX_BYTES = 1 << 20
# How long a proving reservation lasts if the run dies before deleting it (minutes).
RESERVATION_MINUTES = 30


def reason_for(checks: Sequence[str]) -> str:
    return f"{OURS} {','.join(checks)}"


def ours(node: SlurmNode) -> bool:
    return node.reason.startswith(OURS)


def drained(node: SlurmNode) -> bool:
    """Drained or draining: the DRAIN flag (JSON) or a drain state (`sinfo -o %T`)."""
    return "drain" in node.flags or node.state in ("drained", "draining", "drain")


def drain_command(name: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"]


def resume_command(name: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={name}", "State=RESUME"]


def reservation_name(name: str) -> str:
    return f"computefence-resume-{name}"


def shown(argv: Sequence[str]) -> str:
    return shlex.join(argv)


@dataclass
class Scontrol:
    """Runs scontrol (and sinfo) in `env`, each call bounded; the seam tests point at a real cluster."""

    env: Mapping[str, str] | None = None
    # Seconds each call may take.
    timeout: float = SCONTROL_TIMEOUT_S

    def run(self, argv: list[str]) -> tuple[bool, str]:
        """(succeeded, what it said, one line)."""
        try:
            status, stdout, stderr = run_tool(
                argv, self.timeout, SCONTROL_MAX_BYTES, env=dict(self.env) if self.env else None
            )
        except FileNotFoundError:
            return False, f"{argv[0]} is not on PATH"
        except OSError as exc:
            return False, f"{argv[0]} could not start: {exc.strerror or exc}"
        except ToolTimeout:
            return False, f"{argv[0]} gave no answer within {self.timeout:g}s"
        except ToolOverflow:
            return False, f"{argv[0]} printed over {SCONTROL_MAX_BYTES:,} bytes"
        said = (stderr or stdout).decode("utf-8", "replace").strip()
        return status == 0, one_line(said, 200)

    def nodes(self, names: Sequence[str]) -> dict[str, SlurmNode]:
        """The named nodes as the cluster lists them now (sinfo); names it does not list are absent."""
        if not names:
            return {}
        wanted = set(names)
        return {
            node.name: node
            for node in SlurmSource(env=self.env, timeout=self.timeout).nodes(names)
            if node.name in wanted
        }


def slurm_hosts(report: Report) -> list[HostReport]:
    """The report's Slurm nodes; a name that is no node name (a report is untrusted) is never one."""
    return [
        h for h in report.hosts if h.provider is not None and h.provider.provider == "slurm" and valid_node_name(h.name)
    ]


def _known_checks(findings_checks: Sequence[str]) -> list[str]:
    """Check ids of a saved report that the evaluator knows (a report is untrusted input)."""
    return sorted({c for c in findings_checks if c in evaluate.CHECKS})


# ---------------------------------------------------------------- drain


def plan_drain(report: Report, scontrol: Scontrol) -> list[NodeAction]:
    """The report's Slurm nodes blocked by a machine fault, each as it stands now."""
    faulted = [(h, _known_checks([f.check for f in machine_faults(h)])) for h in slurm_hosts(report)]
    faulted = [(h, checks) for h, checks in faulted if checks]
    now = scontrol.nodes([h.name for h, _ in faulted])
    planned = []
    for host, checks in faulted:
        reasons = [f"{f.check}: {one_line(f.message, 120)}" for f in machine_faults(host) if f.check in checks]
        action = NodeAction(name=host.name, action="drain", selected_by=checks, outcome="planned", reasons=reasons)
        node = now.get(host.name)
        if node is None:
            planned.append(action.model_copy(update={"outcome": "gone", "detail": "the cluster no longer lists it"}))
            continue
        update: dict[str, object] = {"state": node.state_text, "reason": node.reason or None}
        if drained(node) and ours(node):
            update |= {"outcome": "already_drained", "detail": f"drained: {node.reason}"}
        elif drained(node) or node.unusable:
            update |= {
                "outcome": "left_alone",
                "detail": f"Slurm has it {node.state_text}" + (f" ({node.reason})" if node.reason else ""),
            }
        else:
            update |= {"commands": [shown(drain_command(host.name, reason_for(checks)))]}
        planned.append(action.model_copy(update=update))
    return planned


def act_drain(planned: list[NodeAction], scontrol: Scontrol, log: ActionLog) -> list[NodeAction]:
    done = []
    for action in planned:
        if action.outcome != "planned":
            done.append(action)
            continue
        argv = drain_command(action.name, reason_for(action.selected_by))
        log.record("send", node=action.name, call=shown(argv))
        ok, said = scontrol.run(argv)
        log.record("answer", node=action.name, ok=ok, said=said)
        after = scontrol.nodes([action.name]).get(action.name)
        if ok and after is not None and drained(after) and ours(after):
            done.append(action.model_copy(update={"outcome": "drained", "detail": f"now {after.state_text}"}))
        else:
            why = said or (f"Slurm has it {after.state_text}" if after else "the node is no longer listed")
            done.append(action.model_copy(update={"outcome": "failed", "detail": why}))
    return done


# ---------------------------------------------------------------- resume


def plan_resume(report: Report, scontrol: Scontrol) -> list[NodeAction]:
    """The report's Slurm nodes that are drained now with a reason of ours; other drains are
    listed as left alone, nodes in service as not drained."""
    hosts = slurm_hosts(report)
    now = scontrol.nodes([h.name for h in hosts])
    user = _user()
    planned = []
    for host in hosts:
        node = now.get(host.name)
        action = NodeAction(name=host.name, action="resume", outcome="planned")
        if node is None:
            planned.append(action.model_copy(update={"outcome": "gone", "detail": "the cluster no longer lists it"}))
            continue
        action = action.model_copy(update={"state": node.state_text, "reason": node.reason or None})
        if not drained(node):
            planned.append(
                action.model_copy(update={"outcome": "not_drained", "detail": f"in service ({node.state_text})"})
            )
        elif not ours(node):
            planned.append(
                action.model_copy(
                    update={"outcome": "left_alone", "detail": f"drained by someone else: {node.reason or 'no reason'}"}
                )
            )
        else:
            planned.append(
                action.model_copy(
                    update={
                        "commands": [shown(c) for c in _resume_steps(node.name, user)],
                        "selected_by": [node.reason],
                    }
                )
            )
    return planned


def _user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def _resume_steps(name: str, user: str) -> list[list[str]]:
    reservation = reservation_name(name)
    return [
        [
            "scontrol",
            "create",
            "reservation",
            f"ReservationName={reservation}",
            f"Nodes={name}",
            f"Users={user}",
            "StartTime=now",
            f"Duration={RESERVATION_MINUTES}",
            "Flags=MAINT,IGNORE_JOBS",
        ],
        resume_command(name),
        # Shown in the plan; the probe's own step is the connector's (srun_argv).
        ["srun", f"--reservation={reservation}", f"--nodelist={name}", "--nodes=1", "--ntasks=1", "python3", "-"],
        ["scontrol", "delete", f"ReservationName={reservation}"],
    ]


Prover = Callable[[SlurmNode, str], HostReport]


def slurm_prover(options: SlurmOptions) -> Prover:
    """Probe one node in its reservation and judge only the machine."""

    def prove(node: SlurmNode, reservation: str) -> HostReport:
        # The run session every command opens, on the one node, through a connector held to
        # the reservation.
        target = node_target(node).model_copy(update={"unreachable_reason": None, "unreachable_fix": None})
        connector = SlurmConnector(replace(options, reservation=reservation, partitions=()))
        with open_session([target], run.rules(only=MACHINE_CHECKS), connector=connector) as session:
            [host] = session.judge(session.probe())
        return host

    return prove


def act_resume(planned: list[NodeAction], scontrol: Scontrol, log: ActionLog, prove: Prover) -> list[NodeAction]:
    done = []
    user = _user()
    for action in planned:
        if action.outcome != "planned":
            done.append(action)
            continue
        done.append(_resume_one(action, scontrol, log, prove, user))
    return done


def logged_call(scontrol: Scontrol, log: ActionLog, name: str, argv: list[str]) -> tuple[bool, str]:
    """One scontrol call that changes the cluster, logged before it is made and with its answer."""
    log.record("send", node=name, call=shown(argv))
    ok, said = scontrol.run(argv)
    log.record("answer", node=name, ok=ok, said=said)
    return ok, said


def _resume_one(action: NodeAction, scontrol: Scontrol, log: ActionLog, prove: Prover, user: str) -> NodeAction:
    name = action.name
    node = scontrol.nodes([name]).get(name)
    # Re-read just before acting: someone may have changed it since the plan.
    if node is None or not drained(node) or not ours(node):
        state = f"now {node.state_text} ({node.reason or 'no reason'})" if node else "no longer listed"
        return action.model_copy(update={"outcome": "left_alone", "detail": f"changed since the plan: {state}"})
    reason = node.reason
    reservation = reservation_name(name)
    create, resume, _, delete = _resume_steps(name, user)
    ok, said = logged_call(scontrol, log, name, create)
    # A reservation left by an interrupted run is ours to reuse.
    if not ok and "Duplicate reservation name" not in said:
        return action.model_copy(update={"outcome": "failed", "detail": f"no reservation: {said}"})
    ok, said = logged_call(scontrol, log, name, resume)
    if not ok:
        logged_call(scontrol, log, name, delete)
        return action.model_copy(update={"outcome": "failed", "detail": f"the drain was not lifted: {said}"})
    try:
        host = prove(node, reservation)
    except BaseException:
        # Ctrl-C mid-proof: the node goes back to its drain before the run ends; left in the
        # reservation it would return to service unproven when the reservation runs out.
        logged_call(scontrol, log, name, drain_command(name, reason))
        logged_call(scontrol, log, name, delete)
        raise
    faults = machine_faults(host) if host.status is HostStatus.OK else []
    if host.status is HostStatus.OK and not faults:
        ok, said = logged_call(scontrol, log, name, delete)
        after = scontrol.nodes([name]).get(name)
        if ok and after is not None and not drained(after):
            return action.model_copy(update={"outcome": "resumed", "detail": f"passed; now {after.state_text}"})
        return action.model_copy(update={"outcome": "failed", "detail": f"passed, but the reservation stays: {said}"})
    why = (
        "; ".join(f"{f.check}: {one_line(f.message, 80)}" for f in faults)
        if faults
        else f"{host.status.value}: {host.reason or ''}"
    )
    logged_call(scontrol, log, name, drain_command(name, reason))
    logged_call(scontrol, log, name, delete)
    after = scontrol.nodes([name]).get(name)
    kept = after is not None and drained(after) and after.reason == reason
    return action.model_copy(
        update={
            "outcome": "kept_drained" if kept else "failed",
            "detail": f"failed its check ({why}); drained again"
            if kept
            else f"failed its check ({why}) and the drain could not be restored",
        }
    )


def node_report(kind: str, actions: list[NodeAction], dry_run: bool) -> NodeActionReport:
    return NodeActionReport(kind=kind, dry_run=dry_run, nodes=actions)


def exit_code(result: NodeActionReport) -> int:
    """0 all went as planned; 1 a call failed or a node failed its proof and stays drained."""
    return 1 if any(n.outcome in ("failed", "kept_drained") for n in result.nodes) else 0


def interrupted_line(log: ActionLog) -> str:
    """What a drain or resume interrupted while acting did, from the action log's count."""
    if not log.sends:
        return "computefence: interrupted; no scontrol call was made"
    return (
        f"computefence: interrupted; {plural(log.sends, 'scontrol call')} made, "
        f"not all answered: see {log.path} and `sinfo -R`"
    )
