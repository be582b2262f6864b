"""Whether two probes answered from the same machine: what proves a fix must come from the
pod it was applied to, not from whatever answers at its address afterwards (a reused IP and
port, a replaced pod, a pod that lies).

Only what both probes report is compared, and only what no fix step changes: the hostname,
/etc/machine-id, the GPUs' UUIDs (a GPU may vanish from a sick machine, none may appear) and
the provider's pod id as the pod itself reports it.
"""

from __future__ import annotations

from computefence.models import Facts, HostReport
from computefence.text import one_line


def machine_changes(before: HostReport, after: HostReport) -> list[str]:
    """How the machine that answered `after` differs from the one that answered `before`;
    empty when nothing they both report differs."""
    changes: list[str] = []
    if before.provider is not None and after.provider is not None:
        _differs(changes, "provider id", before.provider.pod_id, after.provider.pod_id)
    if before.facts is None or after.facts is None:
        return changes
    return changes + _fact_changes(before.facts, after.facts)


def _fact_changes(before: Facts, after: Facts) -> list[str]:
    changes: list[str] = []
    _differs(changes, "hostname", before.identity.hostname, after.identity.hostname)
    _differs(changes, "machine id", before.identity.machine_id, after.identity.machine_id)
    hints_before, hints_after = before.identity.provider_hints, after.identity.provider_hints
    for name in sorted(set(hints_before) & set(hints_after)):
        _differs(changes, name, hints_before[name], hints_after[name])
    uuids_before = {g.uuid for g in before.gpu.gpus if g.uuid}
    uuids_after = {g.uuid for g in after.gpu.gpus if g.uuid}
    if uuids_before and uuids_after - uuids_before:
        new = sorted(uuids_after - uuids_before)
        changes.append(
            f"GPU {one_line(new[0], 60)} was not on it" + (f" (and {len(new) - 1} more)" if len(new) > 1 else "")
        )
    return changes


def _differs(changes: list[str], what: str, before: str | None, after: str | None) -> None:
    if before and after and before != after:
        changes.append(f"{what} {one_line(after, 60)!r}, was {one_line(before, 60)!r}")
