"""The fleet-wide view: summary counts, money at risk, version drift and the verdict."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone

from computefence.evaluate.checks import gpu, gpu_perf
from computefence.evaluate.fleet_steps import FleetStep, run_fleet_step
from computefence.models import (
    DriftRow,
    Facts,
    Finding,
    HostReport,
    HostStatus,
    Remedy,
    Report,
    Severity,
    SourceStatus,
    Summary,
)
from computefence.policy import matches
from computefence.version import __version__

NOT_INSTALLED = "(not installed)"
NONE = "(none)"


def build_report(
    hosts: list[HostReport],
    *,
    kind: str,
    sources: Iterable[SourceStatus] = (),
    fail_on: Severity = Severity.BLOCK,
    allow_unreachable: bool = False,
) -> Report:
    sources = list(sources)
    hosts = list(hosts)
    # Each fleet-wide step survives a pod whose facts break it: that pod is probe_failed.
    if kind == "fleet":
        beside: FleetStep[dict[str, HostReport]] = run_fleet_step(
            "perf beside the fleet median",
            hosts,
            lambda some: {h.name: h for h in gpu_perf.beside_fleet_median(some)},
            {},
        )
        hosts = [beside.result.get(h.name, h) for h in beside.hosts]
    rows: FleetStep[list[DriftRow]] = run_fleet_step("version drift", hosts, drift, [])
    hosts = rows.hosts
    return Report(
        tool_version=__version__,
        kind=kind,
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        hosts=list(hosts),
        sources=sources,
        drift=rows.result,
        summary=summarize(hosts, sources, allow_unreachable=allow_unreachable),
        fail_on=fail_on,
        allow_unreachable=allow_unreachable,
    )


def summarize(
    hosts: list[HostReport], sources: Iterable[SourceStatus] = (), *, allow_unreachable: bool = False
) -> Summary:
    """Counts, money and verdict. A pod that could not be checked, or a source that could not
    be read (its pods went unchecked), blocks unless allow_unreachable; then it warns."""
    summary = Summary(hosts=len(hosts))
    total = at_risk = 0.0
    priced = False
    for host in hosts:
        blockers, warnings = host.blockers, host.warnings
        summary.blockers += blockers
        summary.warnings += warnings
        summary.passed += sum(1 for f in host.findings if f.severity is Severity.PASS)
        summary.skipped += sum(1 for f in host.findings if f.severity is Severity.SKIP)
        ok = host.status is HostStatus.OK
        if ok:
            summary.ok += 1
            if blockers:
                summary.hosts_blocked += 1
            elif warnings:
                summary.hosts_warned += 1
            else:
                summary.hosts_clean += 1
        else:
            summary.not_ok += 1
        cost = host.provider.cost_per_hour if host.provider is not None else None
        if cost is not None:
            priced = True
            total += cost
            if blockers or not ok:
                at_risk += cost
                summary.hosts_at_risk_priced += 1
    if priced:
        summary.cost_per_hour_total = round(total, 4)
        summary.cost_per_hour_at_risk = round(at_risk, 4)
    unchecked = summary.not_ok > 0 or any(not source.ok for source in sources)
    if summary.blockers or (unchecked and not allow_unreachable):
        summary.verdict = Severity.BLOCK
    elif summary.warnings or unchecked:
        summary.verdict = Severity.WARN
    else:
        summary.verdict = Severity.PASS
    return summary


def fails(severity: Severity, fail_on: Severity) -> bool:
    """Whether a verdict or finding of `severity` fails a run with this --fail-on level."""
    return severity is Severity.BLOCK or (severity is Severity.WARN and fail_on is Severity.WARN)


def exit_code(report: Report) -> int:
    """1 when the verdict reaches the report's fail_on level, else 0."""
    return 1 if fails(report.summary.verdict, report.fail_on) else 0


def ready_hosts(report: Report) -> list[HostReport]:
    """The pods a job can start on: checked, and no finding that fails the run's --fail-on level."""
    return [
        host
        for host in report.hosts
        if host.status is HostStatus.OK and not any(fails(f.severity, report.fail_on) for f in host.findings)
    ]


def replace_blockers(host: HostReport) -> list[Finding]:
    """The host's blockers whose remedy is `replace`: the machine is at fault, only another helps."""
    return [f for f in host.blocking_findings if f.remedy is Remedy.REPLACE]


def give_back(report: Report) -> list[HostReport]:
    """Checked pods blocked by a `replace` finding: those to stop paying for."""
    return [h for h in report.hosts if h.status is HostStatus.OK and replace_blockers(h)]


def release_findings(host: HostReport, patterns: list[str]) -> list[Finding]:
    """The blockers and warnings that would condemn the pod: those of a `replace` check, or
    with `patterns` (fleet release --checks) those of the checks they name, any remedy."""
    problems = [f for f in host.findings if f.severity in (Severity.BLOCK, Severity.WARN)]
    if not patterns:
        return [f for f in problems if f.remedy is Remedy.REPLACE]
    return [f for f in problems if any(matches(f.check, p) for p in patterns)]


def job_may_be_running(host: HostReport) -> str | None:
    """Why the report suggests a job runs on the pod (GPU memory held by other processes),
    or None. Read from gpu.memory-in-use, and from the memory facts where that check was
    skipped, so `--skip gpu.memory-in-use` cannot hide a running job."""
    for finding in host.findings:
        if finding.check == "gpu.memory-in-use" and finding.severity in (Severity.WARN, Severity.BLOCK):
            return finding.message
    facts = host.facts
    if facts is None:
        return None
    busy = [g for g in facts.gpu.gpus if g.memory_used_mib is not None and g.memory_used_mib > gpu.BUSY_MIB]
    if busy:
        held = ", ".join(f"GPU {g.index} {g.memory_used_mib} MiB" for g in busy)
        return f"GPU memory already in use ({held})"
    return None


# ---------------------------------------------------------------- drift


def component_versions(facts: Facts) -> dict[str, str]:
    torch = facts.torch
    values = {
        "torch": torch.version if torch.importable and torch.version else NOT_INSTALLED,
        "torch CUDA build": (torch.cuda_build or ("ROCm " + torch.hip_build if torch.hip_build else "CPU"))
        if torch.importable
        else NOT_INSTALLED,
        "NVIDIA driver": facts.gpu.driver_version or NONE,
        "driver CUDA": facts.gpu.cuda_version or NONE,
        "python": torch.python_version or facts.identity.python_version or NONE,
    }
    for name, version in facts.packages.versions.items():
        if name != "torch":
            values[name] = version or NOT_INSTALLED
    return values


def drift(hosts: list[HostReport]) -> list[DriftRow]:
    """One row per component whose value differs between the hosts that were checked."""
    checked = [(h, h.facts) for h in hosts if h.status is HostStatus.OK and h.facts is not None]
    if len(checked) < 2:
        return []
    per_host = {h.name: component_versions(facts) for h, facts in checked}
    names: list[str] = []
    for components in per_host.values():
        names += [name for name in components if name not in names]
    rows = []
    for name in names:
        values: dict[str, list[str]] = {}
        for host, components in per_host.items():
            # A host whose package list was not collected says nothing about the package.
            if name in components:
                values.setdefault(components[name], []).append(host)
        if len(values) > 1:
            rows.append(DriftRow(component=name, values=values))
    return rows
