"""`computefence report merge`: shard reports joined into the report one run over all of
their pods would have given (summary, drift and verdict recomputed)."""

from __future__ import annotations

from collections.abc import Sequence

from computefence.errors import ConfigError
from computefence.evaluate import _finish
from computefence.evaluate.checks.environment import OUTLIER, outlier_findings
from computefence.evaluate.fleet import drift, summarize
from computefence.models import Changes, HostReport, HostStatus, Report, SourceStatus


def merge_reports(named: Sequence[tuple[str, Report]]) -> Report:
    """One report from (file name, report) pairs; ConfigError when they cannot be one run:
    different schema versions, kinds or verdict options, or a pod in two of them."""
    if not named:
        raise ConfigError("report merge needs at least one report")
    first_name, first = named[0]
    owner: dict[str, str] = {}
    for name, report in named:
        for field, label in (
            ("schema_version", "schema_version"),
            ("kind", "kind"),
            ("fail_on", "--fail-on"),
            ("allow_unreachable", "--allow-unreachable"),
        ):
            mine, theirs = getattr(report, field), getattr(first, field)
            if mine != theirs:
                raise ConfigError(
                    f"{name} has {label} {_shown(mine)} but {first_name} has {_shown(theirs)}; "
                    "merge only shards of one run"
                )
        for host in report.hosts:
            if host.name in owner:
                raise ConfigError(
                    f"pod {host.name!r} is in both {owner[host.name]} and {name}; shards must not overlap"
                )
            owner[host.name] = name
    reports = [report for _, report in named]
    hosts = _outliers_across(sorted((h for r in reports for h in r.hosts), key=lambda h: h.name))
    sources = _merge_sources(reports)
    return Report(
        schema_version=first.schema_version,
        tool_version=first.tool_version,
        kind=first.kind,
        generated_at=max(r.generated_at for r in reports),
        hosts=hosts,
        sources=sources,
        drift=drift(hosts),
        summary=summarize(hosts, sources, allow_unreachable=first.allow_unreachable),
        fail_on=first.fail_on,
        allow_unreachable=first.allow_unreachable,
        changes=_merge_changes([r.changes for r in reports]),
    )


def _outliers_across(hosts: list[HostReport]) -> list[HostReport]:
    """env.outlier compares a pod with the others of its run: a shard saw only its slice, so the
    outliers are judged again across every pod, as one run would have."""
    outliers = outlier_findings(hosts)
    return [
        host.model_copy(
            update={
                "findings": [f for f in host.findings if f.check != OUTLIER]
                + [_finish(f) for f in outliers.get(host.name, [])]
            }
        )
        if host.status is HostStatus.OK and host.facts is not None
        else host
        for host in hosts
    ]


def _shown(value: object) -> str:
    return str(getattr(value, "value", value))


def _merge_sources(reports: list[Report]) -> list[SourceStatus]:
    """A source every shard read (the same inventory) is listed once; it failed if it failed anywhere."""
    merged: dict[str, SourceStatus] = {}
    for source in (s for r in reports for s in r.sources):
        seen = merged.get(source.name)
        if seen is None:
            merged[source.name] = source.model_copy()
            continue
        seen.targets = max(seen.targets, source.targets)
        if not source.ok:
            seen.ok, seen.error = False, seen.error or source.error
    return list(merged.values())


def _merge_changes(all_changes: list[Changes | None]) -> Changes | None:
    """The shards' change sections together, or none when a shard has none (half a picture misleads)."""
    present = [c for c in all_changes if c is not None]
    if not all_changes or len(present) < len(all_changes):
        return None
    merged = Changes(since=min(c.since for c in present))
    for field in ("new", "cleared", "appeared", "vanished", "status", "versions"):
        items = [item for c in all_changes for item in getattr(c, field)]
        setattr(merged, field, sorted(items, key=lambda item: item if isinstance(item, str) else item.host))
    return merged
