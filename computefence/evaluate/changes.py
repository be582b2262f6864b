"""What changed between two runs of the same fleet: the pure comparison behind `--history`,
`report diff` and the change alerts."""

from __future__ import annotations

from typing import Any

from computefence.evaluate.fleet import component_versions
from computefence.evaluate.identity import finding_identity
from computefence.models import (
    Changes,
    FindingChange,
    HostReport,
    HostStatus,
    Report,
    Severity,
    StatusChange,
    VersionChange,
)

_REPORTED = (Severity.WARN, Severity.BLOCK)


def _rank(severity: Severity | None) -> int:
    return severity.rank if severity is not None else 0


def _reported(host: HostReport) -> dict[tuple[str, str], Severity]:
    """Finding identity (check, key) -> worst severity of the host's warnings and blockers."""
    worst: dict[tuple[str, str], Severity] = {}
    for f in host.findings:
        key = finding_identity(host, f)
        if f.severity in _REPORTED and _rank(f.severity) > _rank(worst.get(key)):
            worst[key] = f.severity
    return worst


def _finding_changes(old: HostReport | None, new: HostReport) -> tuple[list[FindingChange], list[FindingChange]]:
    """(new, cleared) on one pod. A pod not checked last time has nothing cleared and all
    its findings new; a finding that got worse (warn -> block) is new, one that eased is cleared."""
    before = _reported(old) if old is not None and old.status is HostStatus.OK else {}
    after = _reported(new)
    added = [
        FindingChange(host=new.name, severity_before=before.get(key), severity_after=f.severity, finding=f)
        for f in new.findings
        if f.severity in _REPORTED
        and f.severity is after[key := finding_identity(new, f)]
        and _rank(after[key]) > _rank(before.get(key))
    ]
    cleared = []
    if old is not None and old.status is HostStatus.OK:
        cleared = [
            FindingChange(host=new.name, severity_before=f.severity, severity_after=after.get(key), finding=f)
            for f in old.findings
            if f.severity in _REPORTED
            and f.severity is before[key := finding_identity(old, f)]
            and _rank(after.get(key)) < _rank(before[key])
        ]
    return _unique(new, added), _unique(old, cleared) if old is not None else []


def _unique(host: HostReport, changes: list[FindingChange]) -> list[FindingChange]:
    seen, out = set(), []
    for change in changes:
        key = finding_identity(host, change.finding)
        if key not in seen:
            seen.add(key)
            out.append(change)
    return out


def _version_changes(old: HostReport, new: HostReport) -> list[VersionChange]:
    if old.facts is None or new.facts is None or old.status is not HostStatus.OK or new.status is not HostStatus.OK:
        return []
    before, after = component_versions(old.facts), component_versions(new.facts)
    return [
        VersionChange(host=new.name, component=name, before=before[name], after=after[name])
        for name in after
        if name in before and before[name] != after[name]
    ]


def compare_reports(old: Report, new: Report) -> Changes:
    """What `new` says that `old` did not: findings, pods, connection statuses, versions."""
    old_hosts = {h.name: h for h in old.hosts}
    new_hosts = {h.name: h for h in new.hosts}
    changes = Changes(since=old.generated_at)
    for name in sorted(new_hosts):
        host, previous = new_hosts[name], old_hosts.get(name)
        if previous is None:
            changes.appeared.append(name)
        elif previous.status is not host.status:
            changes.status.append(
                StatusChange(host=name, before=previous.status, after=host.status, reason=host.reason)
            )
        added, cleared = _finding_changes(previous, host)
        changes.new += sorted(added, key=_order)
        changes.cleared += sorted(cleared, key=_order)
        if previous is not None:
            changes.versions += _version_changes(previous, host)
    changes.vanished = sorted(set(old_hosts) - set(new_hosts))
    return changes


def _order(change: FindingChange) -> tuple[Any, ...]:
    return (-_rank(change.severity_after or change.severity_before), change.finding.check, change.finding.subject or "")


def worsened(changes: Changes, new: Report) -> bool:
    """`new` has blockers the earlier run did not. A pod that can no longer be checked, or a
    new pod that cannot be checked, counts as one unless `new` allowed unreachable pods."""
    if any(c.severity_after is Severity.BLOCK for c in changes.new):
        return True
    if new.allow_unreachable:
        return False
    appeared = set(changes.appeared)
    return any(s.before is HostStatus.OK and s.after is not HostStatus.OK for s in changes.status) or any(
        h.name in appeared and h.status is not HostStatus.OK for h in new.hosts
    )


def newsworthy(changes: Changes, warnings: bool = False) -> bool:
    """Worth an alert: new or cleared blockers, pods that stopped or started answering, pods
    gone; with `warnings` (fleet watch, where a warning is a run wasting its hours) new
    warnings too."""
    return (
        any(c.severity_after is Severity.BLOCK or (warnings and c.severity_after is Severity.WARN) for c in changes.new)
        or any(c.severity_before is Severity.BLOCK for c in changes.cleared)
        or any(HostStatus.OK in (s.before, s.after) for s in changes.status)
        or bool(changes.vanished)
    )
