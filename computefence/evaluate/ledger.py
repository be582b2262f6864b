"""The host ledger: the physical machines behind the pods of a history of fleet runs, what
each run found on them, and which ones to avoid when renting the next pod.

A machine is the provider's machine id where discovery recorded one (RunPod machineId, Vast
machine_id), else the pod itself (Lambda Cloud names no machine).
Pure: reports (or their digests, `digest_run`: what the ledger and the history page need of a
run) in, rows out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from computefence.evaluate.checks import gpu_perf
from computefence.evaluate.checks.gpu_health import XID_MEANINGS
from computefence.models import (
    DigestFinding,
    HostLedger,
    HostReport,
    HostStatus,
    LedgerMachine,
    PerfFigure,
    PodDigest,
    Remedy,
    Report,
    RunDigestFile,
    Severity,
)


def digest_run(run: Report) -> RunDigestFile:
    """What the history views need of a saved run: its summary, and per pod its status,
    blockers and warnings, machine, GPU, last Xid and perf figures; the facts are left out."""
    medians = _perf_medians(run)
    pods = []
    for host in run.hosts:
        xids = host.facts.gpu.kernel_log.xid_events if host.facts is not None else []
        pods.append(
            PodDigest(
                name=host.name,
                status=host.status,
                reason=host.reason if host.status is not HostStatus.OK else None,
                provider=host.provider,
                findings=[
                    DigestFinding(check=f.check, severity=f.severity, remedy=f.remedy, key=f.key)
                    for f in host.blocking_findings + host.warning_findings
                ],
                gpu_name=_gpu_name(host),
                last_xid=xids[-1].code if xids else None,
                perf=medians.get(host.name, {}),
            )
        )
    return RunDigestFile(
        generated_at=run.generated_at, fail_on=run.fail_on, summary=run.summary, changes=run.changes, pods=pods
    )


def machine_key(host: HostReport | PodDigest) -> tuple[str, str] | None:
    """(provider, machine id) of a provider pod; the pod id where the provider names no machine.
    hosts, hosts avoid, report history and fleet watch --hosts-history all key machines by it."""
    info = host.provider
    machine = (info.machine_id or info.pod_id) if info is not None else None
    return (info.provider, machine) if info is not None and machine else None


@dataclass
class _Seen:
    row: LedgerMachine
    # Runs by generated_at: a machine can carry two pods in one run, and counts once.
    runs: set[str] = field(default_factory=set)
    blocked: set[str] = field(default_factory=set)
    unanswered: set[str] = field(default_factory=set)
    by_check: dict[str, set[str]] = field(default_factory=dict)
    # Runs in which a `replace` check blocked a pod on the machine, and those checks.
    replace_runs: set[str] = field(default_factory=set)
    replace_checks: set[str] = field(default_factory=set)


def build_ledger(runs: Iterable[Report | RunDigestFile], min_runs: int = 1) -> HostLedger:
    """Every machine of `runs` (oldest first; saved reports or their digests), with its runs,
    blocked runs, blocker counts by check, last Xid, latest perf against that run's fleet
    median and last time seen. A machine is to avoid when a `replace` check blocked it in at
    least `min_runs` runs."""
    seen: dict[tuple[str, str], _Seen] = {}
    count = 0
    for index, run in enumerate(runs):
        count += 1
        digest = run if isinstance(run, RunDigestFile) else digest_run(run)
        # The index keeps two runs saved with one generated_at apart.
        stamp = f"{index}:{digest.generated_at}"
        for pod in digest.pods:
            key = machine_key(pod)
            if key is None:
                continue
            entry = seen.get(key)
            if entry is None:
                entry = seen[key] = _Seen(LedgerMachine(provider=key[0], machine_id=key[1]))
            _add(entry, pod, digest.generated_at, stamp)
    machines = []
    for entry in seen.values():
        row = entry.row
        row.runs, row.blocked_runs, row.unanswered_runs = len(entry.runs), len(entry.blocked), len(entry.unanswered)
        row.checks = {check: len(stamps) for check, stamps in sorted(entry.by_check.items())}
        row.replace_runs = len(entry.replace_runs)
        row.replace_checks = sorted(entry.replace_checks)
        row.avoid = row.replace_runs >= min_runs
        machines.append(row)
    machines.sort(key=lambda m: (not m.avoid, -m.replace_runs, -m.blocked_runs, m.provider, m.machine_id))
    return HostLedger(min_runs=min_runs, runs=count, hosts=machines)


def _add(entry: _Seen, pod: PodDigest, generated_at: str, stamp: str) -> None:
    row = entry.row
    info = pod.provider
    assert info is not None
    entry.runs.add(stamp)
    row.last_seen = generated_at
    row.host_id = info.host_id or row.host_id
    row.gpu_model = info.gpu_type or pod.gpu_name or row.gpu_model
    if pod.status is not HostStatus.OK:
        entry.unanswered.add(stamp)
        return
    blockers = [f for f in pod.findings if f.severity is Severity.BLOCK]
    if blockers:
        entry.blocked.add(stamp)
    for finding in blockers:
        entry.by_check.setdefault(finding.check, set()).add(stamp)
        if _remedy(finding) is Remedy.REPLACE:
            entry.replace_runs.add(stamp)
            entry.replace_checks.add(finding.check)
    if pod.last_xid is not None:
        meaning = XID_MEANINGS.get(pod.last_xid)
        row.last_xid = f"Xid {pod.last_xid}" + (f" ({meaning})" if meaning else "") + f" at {generated_at}"
    if pod.perf:
        row.perf = pod.perf


def _remedy(finding: DigestFinding) -> Remedy:
    """The finding's own remedy, else its check's (a run saved before remedies existed)."""
    if finding.remedy is not None:
        return finding.remedy
    from computefence.evaluate import CHECKS

    spec = CHECKS.get(finding.check)
    return spec.remedy if spec is not None else Remedy.FIX


def _gpu_name(host: HostReport) -> str | None:
    gpus = host.facts.gpu.gpus if host.facts is not None else []
    return gpus[0].name if gpus else None


def _perf_medians(run: Report) -> dict[str, dict[str, PerfFigure]]:
    """Pod name -> perf check -> its figure beside the run's median for its GPU model."""
    out: dict[str, dict[str, PerfFigure]] = {}
    for figures in gpu_perf.saved_fleet_figures(run.hosts):
        median = figures.median
        for pod, value in figures.pods.items():
            out.setdefault(pod, {})[figures.check] = PerfFigure(
                value=round(value, 2),
                unit=figures.unit,
                fleet_median=round(median, 2),
                pods=len(figures.pods),
                share=round(value / median, 3) if median else None,
                at=run.generated_at,
            )
    return out


def avoid_list(ledger: HostLedger) -> list[LedgerMachine]:
    return [m for m in ledger.hosts if m.avoid]
