"""One self-contained HTML page for a run (`--format html`) and for a pool's history
(`report history DIR`).

Inline CSS and inline SVG only: nothing on the page makes a request (no CDN, font or
image), and it reads fully without JavaScript; a little inline script adds copy buttons,
sorting and filters. The page is a Jinja2 template (templates/) with autoescape on, and every
string that reaches it is first cleaned of control characters (computefence.text.clean),
so a pod named `<script>` or `"><img onerror=...>` is text, and a fix command's text is the
command exactly as it would be pasted.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from computefence.evaluate.gpu_perf import fleet_figures
from computefence.models import Changes, Finding, Fix, HostReport, HostStatus, HostVerdict, Report, Severity
from computefence.render import views
from computefence.text import clean, one_line

TEMPLATES = Path(__file__).with_name("templates")

# The verdict is told by a symbol and a word, the colour only repeats them.
SEVERITY_MARK = {Severity.BLOCK: "✖", Severity.WARN: "⚠", Severity.PASS: "✔", Severity.SKIP: "–"}
VERDICT_MARK = {
    HostVerdict.BLOCKED: "✖",
    HostVerdict.WARNINGS: "⚠",
    HostVerdict.READY: "✔",
    HostVerdict.NOT_CHECKED: "⊘",
}
VERDICT_WORD = {
    HostVerdict.BLOCKED: "blocked",
    HostVerdict.WARNINGS: "warnings",
    HostVerdict.READY: "ready",
    HostVerdict.NOT_CHECKED: "not checked",
}
_RUN_VERDICT = {Severity.BLOCK: "blocked", Severity.WARN: "warnings", Severity.PASS: "ready"}


def _finalize(value: Any) -> Any:
    # Applied to every {{ }} before autoescape: a pod's ESC or NUL never reaches the page.
    if value is None:
        return ""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return clean(value)
    return value


@functools.cache
def _environment():
    import jinja2  # only the html format pays for it

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.globals.update(SEVERITY_MARK=SEVERITY_MARK, plural=views.plural)
    return env


# ---------------------------------------------------------------- a run


@dataclass
class PodRow:
    anchor: str
    name: str
    verdict: str  # css class and filter value: ready, warnings, blocked, not-checked
    mark: str
    state: str  # "ready", "blocked", or the connection status ("unreachable")
    provider: str
    gpu: str
    torch: str
    tags: list[str]
    blockers: int | None
    warnings: int | None
    cost: float | None


@dataclass
class FixBlock:
    """Commands to paste, in order (one code block), and plain-words advice after them."""

    commands: list[str]
    advice: str | None


@dataclass
class FindingRow:
    check: str
    severity: str
    mark: str
    message: str
    fix: FixBlock | None


@dataclass
class PodSection:
    row: PodRow
    machine: str
    provider_line: str
    reason: str | None
    fix: FixBlock | None
    problems: list[FindingRow]
    others: list[FindingRow]  # passes and skips


@dataclass
class VariantView:
    message: str
    pods: list[tuple[str, str, str | None]]  # (anchor, name, subject where pods differ)
    fix: FixBlock | None


@dataclass
class CheckGroup:
    check: str
    severity: str
    mark: str
    pod_count: int
    variants: list[VariantView]


@dataclass
class Bar:
    anchor: str | None
    pod: str
    value: float
    severity: str
    mark: str
    y: int
    width: float


@dataclass
class PerfChart:
    model: str
    check: str
    unit: str
    median: float
    median_x: float
    bars: list[Bar]
    height: int
    scale_max: float


@dataclass
class ChangeView:
    label: str
    pod: str
    text: str
    worse: bool | None
    fix: FixBlock | None


@dataclass
class Page:
    title: str
    kind: str
    verdict: str
    verdict_word: str
    verdict_mark: str
    detail: str
    money: str | None
    ready: list[tuple[str, str]]  # (anchor, pod)
    counts: list[tuple[str, int, str]] = field(default_factory=list)
    failed_sources: list[tuple[str, str]] = field(default_factory=list)
    rows: list[PodRow] = field(default_factory=list)
    groups: list[CheckGroup] = field(default_factory=list)
    pods: list[PodSection] = field(default_factory=list)
    drift: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    charts: list[PerfChart] = field(default_factory=list)
    since: str | None = None
    changes_count: str | None = None
    changes: list[ChangeView] = field(default_factory=list)
    generated: str = ""
    applied: str | None = None
    facets: dict[str, list[str]] = field(default_factory=dict)


def render(report: Report) -> str:
    return _environment().get_template("report.html.j2").render(page=_page(report), assets=_assets())


@dataclass(frozen=True)
class _Assets:
    style: str
    script: str
    style_hash: str
    script_hash: str


@functools.cache
def _assets() -> _Assets:
    """The page's CSS and script, and their hashes for its Content-Security-Policy: the
    browser runs these two and nothing else, even if some text were to slip through."""
    style = (TEMPLATES / "page.css").read_text(encoding="utf-8")
    script = (TEMPLATES / "page.js").read_text(encoding="utf-8")
    return _Assets(style, script, _csp_hash(style), _csp_hash(script))


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _fix(fix: Fix | None) -> FixBlock | None:
    if not fix:
        return None
    return FixBlock(list(fix.commands), fix.advice)


def _verdict_class(verdict: HostVerdict) -> str:
    return VERDICT_WORD[verdict].replace(" ", "-")


def _row(host: HostReport, anchor: str) -> PodRow:
    checked = host.status is HostStatus.OK
    return PodRow(
        anchor=anchor,
        name=host.name,
        verdict=_verdict_class(host.verdict),
        mark=VERDICT_MARK[host.verdict],
        state=views.host_state(host).replace("_", " "),
        provider=views.provider_cell(host),
        gpu=views.gpu_cell(host),
        torch=views.torch_cell(host),
        tags=list(host.tags),
        blockers=host.blockers if checked else None,
        warnings=host.warnings if checked else None,
        cost=host.provider.cost_per_hour if host.provider is not None else None,
    )


def _finding(finding: Finding) -> FindingRow:
    return FindingRow(
        check=finding.check,
        severity=finding.severity.value,
        mark=SEVERITY_MARK[finding.severity],
        message=finding.message,
        fix=_fix(finding.fix) if views.has_fix(finding) else None,
    )


def _provider_line(host: HostReport) -> str:
    p = host.provider
    if p is None:
        return ""
    parts = [p.provider, f"pod {p.pod_id}"]
    if p.gpu_type:
        parts.append(f"{p.gpu_count or 1}x {p.gpu_type}")
    if p.cost_per_hour is not None:
        parts.append(f"${p.cost_per_hour:.2f}/h")
    parts += [x for x in (p.region, p.state, p.image) if x]
    return " · ".join(one_line(x) for x in parts)


def _section(host: HostReport, row: PodRow) -> PodSection:
    ordered = [f for _, findings in views.by_area(host.findings) for f in findings]
    return PodSection(
        row=row,
        machine=views.machine_line(host),
        provider_line=_provider_line(host),
        reason=host.reason if host.status is not HostStatus.OK else None,
        fix=_fix(host.fix),
        problems=[_finding(f) for f in ordered if f.severity in (Severity.BLOCK, Severity.WARN)],
        others=[_finding(f) for f in ordered if f.severity in (Severity.PASS, Severity.SKIP)],
    )


def _groups(report: Report, anchors: dict[str, str]) -> list[CheckGroup]:
    groups = []
    for group in views.group_findings(report.hosts):
        variants = []
        for variant in group.variants:
            differ = len(variant.subjects) > 1
            pods = [(anchors.get(name, ""), name, subject if differ else None) for name, subject in variant.hosts]
            variants.append(VariantView(variant.message, pods, _fix(variant.fix)))
        groups.append(
            CheckGroup(
                check=group.check,
                severity=group.severity.value,
                mark=SEVERITY_MARK[group.severity],
                pod_count=len(group.host_names),
                variants=variants,
            )
        )
    return groups


# Perf chart geometry (SVG user units): a row per pod, a bar area beside the pod names.
CHART_LABEL_W = 200
CHART_BAR_W = 460
CHART_ROW_H = 22
CHART_TOP = 28


def _charts(report: Report, anchors: dict[str, str]) -> list[PerfChart]:
    by_host = {h.name: h for h in report.hosts}
    figures = fleet_figures(report.hosts)
    models = list(dict.fromkeys(f.model for f in figures))
    charts = []
    for figure in sorted(figures, key=lambda f: models.index(f.model)):
        scale_max = max([*figure.pods.values(), figure.median]) * 1.1 or 1.0
        bars = []
        for index, (pod, value) in enumerate(figure.pods.items()):
            worst = max(
                (f.severity for f in by_host[pod].findings if f.check == figure.check),
                key=lambda s: s.rank,
                default=Severity.PASS,
            )
            bars.append(
                Bar(
                    anchor=anchors.get(pod),
                    pod=pod,
                    value=value,
                    severity=worst.value,
                    mark=SEVERITY_MARK[worst],
                    y=CHART_TOP + index * CHART_ROW_H,
                    width=round(CHART_BAR_W * value / scale_max, 1),
                )
            )
        charts.append(
            PerfChart(
                model=figure.model,
                check=figure.check,
                unit=figure.unit,
                median=figure.median,
                median_x=round(CHART_LABEL_W + CHART_BAR_W * figure.median / scale_max, 1),
                bars=bars,
                height=CHART_TOP + len(bars) * CHART_ROW_H + 8,
                scale_max=scale_max,
            )
        )
    return charts


def change_views(changes: Changes) -> list[ChangeView]:
    return [
        ChangeView(line.label, line.host, line.text, line.worse, _fix(line.fix)) for line in views.change_lines(changes)
    ]


def _page(report: Report) -> Page:
    s = report.summary
    fleet = report.kind == "fleet"
    title = "ComputeFence fleet check" if fleet else f"ComputeFence {report.kind}"
    anchors = {host.name: f"pod-{index}" for index, host in enumerate(report.hosts, 1)}
    rows = [_row(host, anchors[host.name]) for host in report.hosts]
    verdict = _RUN_VERDICT[s.verdict]
    page = Page(
        title=title,
        kind=report.kind,
        verdict=verdict,
        verdict_word=views.verdict_word(report),
        verdict_mark={"blocked": "✖", "warnings": "⚠", "ready": "✔"}[verdict],
        detail=views.verdict_detail(report),
        money=views.money_line(report),
        ready=[(anchors[h.name], h.name) for h in report.hosts if h.verdict is HostVerdict.READY] if fleet else [],
        rows=rows,
        pods=[_section(host, row) for host, row in zip(report.hosts, rows)],
        generated=f"generated {report.generated_at} by computefence {report.tool_version}",
        applied=views.applied_line(report),
    )
    if fleet:
        page.counts = [
            ("blocked", s.hosts_blocked, "blocked"),
            ("not checked", s.not_ok, "not-checked"),
            ("with warnings", s.hosts_warned, "warnings"),
            ("ready", len(page.ready), "ready"),
        ]
        page.failed_sources = [(src.name, src.error or "unknown error") for src in views.failed_sources(report)]
        page.groups = _groups(report, anchors)
        page.drift = [(row.component, views.drift_cells(row.values)) for row in report.drift]
        page.facets = {
            "status": sorted({r.verdict for r in rows}),
            "provider": sorted({r.provider for r in rows}),
            "gpu": sorted({r.gpu for r in rows}),
            "tag": sorted({t for r in rows for t in r.tags}),
        }
    page.charts = _charts(report, anchors)
    if report.changes is not None:
        page.since = views.since_title(report.changes)
        page.changes_count = views.changes_count_line(report.changes)
        page.changes = change_views(report.changes)
    return page
