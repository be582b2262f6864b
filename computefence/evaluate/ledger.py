"""The host ledger: the physical machines behind the pods of a history of fleet runs, what
each run found on them, and which ones to avoid when renting the next pod.

A machine is the provider's machine id where discovery recorded one (RunPod machineId, Vast
machine_id; a Lambda instance is its own machine); a pod without one is in no machine's row.
Pure: reports in, rows out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from computefence.evaluate import gpu_perf
from computefence.evaluate.gpu_health import XID_MEANINGS
from computefence.models import HostLedger, HostReport, HostStatus, LedgerMachine, PerfFigure, Remedy, Report, Severity


def machine_key(host: HostReport) -> tuple[str, str] | None:
    """(provider, machine id) of a provider pod whose provider named its machine (the Lambda
    source names the instance itself); None otherwise. hosts, hosts avoid and report history
    all key machines by it."""
    info = host.provider
    return (info.provider, info.machine_id) if info is not None and info.machine_id else None


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


def build_ledger(runs: Sequence[Report], min_runs: int = 1) -> HostLedger:
    """Every machine of `runs` (oldest first), with its runs, blocked runs, blocker counts by
    check, last Xid, latest perf against that run's fleet median and last time seen. A machine
    is to avoid when a `replace` check blocked it in at least `min_runs` runs."""
    seen: dict[tuple[str, str], _Seen] = {}
    for index, run in enumerate(runs):
        # The index keeps two runs saved with one generated_at apart.
        stamp = f"{index}:{run.generated_at}"
        medians = _perf_medians(run)
        for host in run.hosts:
            key = machine_key(host)
            if key is None:
                continue
            entry = seen.get(key)
            if entry is None:
                entry = seen[key] = _Seen(LedgerMachine(provider=key[0], machine_id=key[1]))
            _add(entry, host, run, stamp, medians.get(host.name, {}))
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
    return HostLedger(min_runs=min_runs, runs=len(runs), hosts=machines)


def _add(entry: _Seen, host: HostReport, run: Report, stamp: str, perf: dict[str, PerfFigure]) -> None:
    row = entry.row
    info = host.provider
    assert info is not None
    entry.runs.add(stamp)
    row.last_seen = run.generated_at
    row.host_id = info.host_id or row.host_id
    row.gpu_model = info.gpu_type or _gpu_name(host) or row.gpu_model
    if host.status is not HostStatus.OK:
        entry.unanswered.add(stamp)
        return
    blockers = [f for f in host.findings if f.severity is Severity.BLOCK]
    if blockers:
        entry.blocked.add(stamp)
    for finding in blockers:
        entry.by_check.setdefault(finding.check, set()).add(stamp)
        if finding.remedy is Remedy.REPLACE:
            entry.replace_runs.add(stamp)
            entry.replace_checks.add(finding.check)
    xids = host.facts.gpu.kernel_log.xid_events if host.facts is not None else []
    if xids:
        code = xids[-1].code
        meaning = XID_MEANINGS.get(code)
        row.last_xid = f"Xid {code}" + (f" ({meaning})" if meaning else "") + f" at {run.generated_at}"
    if perf:
        row.perf = perf


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
