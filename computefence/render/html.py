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
from typing import TYPE_CHECKING, Any

from computefence.evaluate.checks.gpu_perf import saved_fleet_figures
from computefence.models import Changes, Finding, Fix, HostReport, HostStatus, HostVerdict, Report, Severity
from computefence.render import views
from computefence.render.interface import Renderer
from computefence.text import clean, one_line, plural

if TYPE_CHECKING:
    import jinja2

    from computefence.operations.history import PodRun, RunDigest

TEMPLATES = Path(__file__).with_name("templates")
# Above this many pods the page lays out off-screen sections only when they are scrolled to.
LARGE_FLEET = 100

# The verdict is told by a symbol and a word, the colour only repeats them (the page's CSS
# puts the same symbols before each state and severity word).
SEVERITY_MARK = {Severity.BLOCK: "✖", Severity.WARN: "⚠", Severity.PASS: "✔", Severity.SKIP: "–"}
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
        # isprintable() (in C) is False for every character clean() would replace.
        return value if value.isprintable() else clean(value)
    return value


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # only the html format pays for it

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
    )
    env.globals.update(
        plural=plural,
        LARGE_FLEET=LARGE_FLEET,
        READY_NAMED=views.READY_NAMED,
        SEVERITY_MARK={s.value: mark for s, mark in SEVERITY_MARK.items()},
    )
    return env


# ---------------------------------------------------------------- a run


@dataclass
class PodRow:
    anchor: str
    name: str
    verdict: str  # css class and filter value: ready, warnings, blocked, not-checked
    state: str  # "ready", "blocked", or the connection status ("unreachable")
    provider: str
    gpu: str
    torch: str
    tags: list[str]
    blockers: int | None
    warnings: int | None
    cost: float | None


@dataclass
class StepView:
    run: str
    # views.step_mark: "local", "inspect", "disruptive", "local, destructive"; None for a safe pod step.
    mark: str | None
    kind: str


@dataclass
class FixBlock:
    """Steps to paste, in order (one code block), and plain-words advice after them."""

    steps: list[StepView]
    advice: str | None


@dataclass
class FindingRow:
    check: str
    severity: str
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
    passed: int
    skipped: int


@dataclass
class VariantView:
    message: str
    pods: list[tuple[str, str, str | None]]  # (anchor, name, subject where pods differ)
    fix: FixBlock | None


@dataclass
class CheckGroup:
    check: str
    severity: str
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
    # As the terminal has them: the pods no command fixes, with their $/h, and the pods not checked.
    give_back_title: str = ""
    give_back_note: str = ""
    give_back: list[tuple[str | None, str, str, str]] = field(default_factory=list)  # anchor, pod, $/h, checks
    not_checked: list[PodSection] = field(default_factory=list)


def render(report: Report) -> str:
    text: str = _environment().get_template("report.html.j2").render(page=_page(report), assets=_assets())
    return text


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
    return FixBlock([StepView(step.run, views.step_mark(step), step.kind.value) for step in fix.steps], fix.advice)


def _verdict_class(verdict: HostVerdict) -> str:
    return VERDICT_WORD[verdict].replace(" ", "-")


def _row(host: HostReport, anchor: str) -> PodRow:
    checked = host.status is HostStatus.OK
    return PodRow(
        anchor=anchor,
        name=host.name,
        verdict=_verdict_class(host.verdict),
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
        passed=sum(1 for f in ordered if f.severity is Severity.PASS),
        skipped=sum(1 for f in ordered if f.severity is Severity.SKIP),
    )


def _groups(report: Report, anchors: dict[str, str]) -> list[CheckGroup]:
    groups = []
    for group in views.group_findings(report.hosts):
        variants = []
        for variant in group.variants:
            differ = len(variant.subjects) > 1
            pods = [
                (anchors.get(name, ""), name, ", ".join(subjects) if differ else None)
                for name, subjects in variant.pods
            ]
            variants.append(VariantView(variant.message, pods, _fix(variant.fix)))
        groups.append(
            CheckGroup(
                check=group.check,
                severity=group.severity.value,
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
    figures = saved_fleet_figures(report.hosts)
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
        page.counts = views.pod_counts(s, watch=report.kind == "watch")
        page.failed_sources = [(src.name, src.error or "unknown error") for src in views.failed_sources(report)]
        page.groups = _groups(report, anchors)
        page.drift = [(row.component, views.drift_cells(row.values)) for row in report.drift]
        page.give_back = [(anchors.get(r.name), r.name, r.cost, r.checks) for r in views.give_back_rows(report)]
        if page.give_back:
            page.give_back_title = views.give_back_title(report)
            page.give_back_note = views.GIVE_BACK_NOTE
        not_checked = {h.name for h in views.not_ok_hosts(report)}
        page.not_checked = [pod for pod in page.pods if pod.row.name in not_checked]
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


# ---------------------------------------------------------------- a pool's history

# Status matrix geometry (SVG user units): a row per pod, a column per run.
CELL_W = 14
CELL_W_MAX = 40
CELL_H = 16
TICK_W = 56
CELL_GAP = 2
LABEL_CHAR_W = 7.2
_CELL_MARK = {"blocked": "✖", "warnings": "!", "not-checked": "⊘", "ready": "", "absent": ""}


@dataclass
class MatrixRow:
    pod: str
    y: int
    # The row's cells, drawn (_cells_svg).
    cells: str


@dataclass
class Matrix:
    width: int
    height: int
    label_w: int
    top: int
    cell_w: int
    rows: list[MatrixRow]
    ticks: list[tuple[int, str]]  # (x, label) under some columns


@dataclass
class TrendPoint:
    x: float
    blocked_y: float
    ready_y: float
    when: str
    blocked: int
    ready: int
    not_checked: int
    warned: int
    total: int
    verdict: str


@dataclass
class Trend:
    width: int
    height: int
    top: float
    bottom: float
    left: float
    right: float
    y_ticks: list[tuple[float, int]]
    points: list[TrendPoint]
    blocked_path: str
    ready_path: str


@dataclass
class FailingPod:
    pod: str
    provider_id: str | None
    seen: int
    blocked: int
    not_checked: int
    warned: int
    last_verdict: str
    last_failed: str | None
    top_checks: list[tuple[str, int]]


@dataclass
class FailingMachine:
    provider: str
    machine_id: str
    pods: list[str]  # the pods seen on it, newest first
    pod_runs: int  # runs of any pod on it
    failed: int  # of those, blocked or not checked
    top_checks: list[tuple[str, int]]
    last_failed: str | None


@dataclass
class RunChanges:
    when: str
    count: str
    changes: list[ChangeView]


@dataclass
class HistoryPage:
    title: str
    runs: int
    first: str
    last: str
    verdict: str
    verdict_word: str
    verdict_mark: str
    counts: list[tuple[str, int, str]]
    ready: list[str]
    matrix: Matrix
    trend: Trend
    newest_changes: list[RunChanges]
    failing: list[FailingPod]
    machines: list[FailingMachine]
    machine_ids_seen: bool


def render_history(runs: list[RunDigest]) -> str:
    """`report history DIR`: the saved runs (operations.history.RunDigest, oldest first)."""
    text: str = _environment().get_template("history.html.j2").render(page=_history_page(runs), assets=_assets())
    return text


def _when(generated_at: str) -> str:
    """'2026-12-01 20:45Z': the run's time as its title says it, short."""
    text = one_line(generated_at)
    return text[:16].replace("T", " ") + ("Z" if text.endswith(("Z", "+00:00")) else "") if len(text) >= 16 else text


def _pod_order(runs: list[RunDigest]) -> list[str]:
    """The newest run's pods in its order, then pods only earlier runs had, newest gone first."""
    order = list(runs[-1].pods)
    seen = set(order)
    for run in reversed(runs[:-1]):
        for name in run.pods:
            if name not in seen:
                seen.add(name)
                order.append(name)
    return order


def _cell_title(pod: str, when: str, state: PodRun | None, verdict: str) -> str:
    if state is None:
        return f"{pod} · {when}: not in this run"
    if state.status is not HostStatus.OK:
        return f"{pod} · {when}: not checked ({state.status.value}){': ' + one_line(state.reason, 120) if state.reason else ''}"
    if not state.problems:
        return f"{pod} · {when}: ready"
    findings = ", ".join(f"{check} ({severity.value})" for check, severity in state.problems)
    return f"{pod} · {when}: {verdict}: {findings}"


def _cells_svg(runs: list[RunDigest], pod: str, whens: list[str], y: int, cell_w: int) -> str:
    """A pod's row of the matrix, one cell per run, as SVG markup. Drawn here, not in the
    template: a day of a 1,000-pod pool is 96,000 cells, and the template's eight escaped
    expressions a cell were a third of the page's time. The one text in it, the cell's title,
    is cleaned and escaped as the template does every value."""
    from markupsafe import Markup, escape

    step = cell_w + CELL_GAP
    cells = []
    for column, run in enumerate(runs):
        state = run.pods.get(pod)
        css = "absent" if state is None else _verdict_class(state.verdict)
        title = escape(clean(_cell_title(pod, whens[column], state, css.replace("-", " "))))
        x = CELL_GAP + column * step
        mark = _CELL_MARK[css]
        cells.append(
            f'<g><title>{title}</title><rect class="cell-{css}" x="{x}" y="{y}" width="{cell_w}"'
            f' height="{CELL_H}" rx="2"/>'
            + (
                f'<text class="cell-mark" x="{x + cell_w // 2}" y="{y + 12}" text-anchor="middle">{mark}</text>'
                if mark
                else ""
            )
            + "</g>"
        )
    return Markup("\n".join(cells))


def _matrix(runs: list[RunDigest], pods: list[str]) -> Matrix:
    label_w = int(min(260, max(80, max(len(one_line(p)) for p in pods) * LABEL_CHAR_W)) + 10)
    top = 8
    # A few runs get wide cells, a day of them narrow ones: about 640 units of runs either way.
    cell_w = min(CELL_W_MAX, max(CELL_W, 640 // len(runs) - CELL_GAP))
    step = cell_w + CELL_GAP
    whens = [_when(run.generated_at) for run in runs]
    rows = []
    for index, pod in enumerate(pods):
        y = top + index * (CELL_H + CELL_GAP)
        rows.append(MatrixRow(pod=pod, y=y, cells=_cells_svg(runs, pod, whens, y, cell_w)))
    # Time labels under the columns, at least TICK_W apart; the newest run's always.
    ticks: list[tuple[int, str]] = []
    for column in reversed(range(len(runs))):
        x = CELL_GAP + column * step
        if not ticks or ticks[-1][0] - x >= TICK_W:
            ticks.append((x, whens[column][11:] or whens[column]))
    height = top + len(pods) * (CELL_H + CELL_GAP) + 34
    # The pod names are an SVG of their own beside the cells, so they stay put while a wide
    # matrix scrolls to its newest runs.
    return Matrix(len(runs) * step + 60, height, label_w, top, cell_w, rows, ticks)


TREND_W = 760
TREND_H = 220


def _trend(runs: list[RunDigest]) -> Trend:
    left, right, top, bottom = 44.0, TREND_W - 120.0, 14.0, TREND_H - 30.0
    highest = max(max(r.summary.hosts for r in runs), 1)
    span = max(len(runs) - 1, 1)

    def y(value: int) -> float:
        return float(round(bottom - (bottom - top) * value / highest, 1))

    points = []
    for index, run in enumerate(runs):
        s = run.summary
        x = round(left + (right - left) * (index / span if len(runs) > 1 else 0.5), 1)
        points.append(
            TrendPoint(
                x=x,
                blocked_y=y(s.hosts_blocked),
                ready_y=y(s.hosts_clean),
                when=_when(run.generated_at),
                blocked=s.hosts_blocked,
                ready=s.hosts_clean,
                not_checked=s.not_ok,
                warned=s.hosts_warned,
                total=s.hosts,
                verdict=_RUN_VERDICT[s.verdict],
            )
        )
    ticks = sorted({0, highest // 2, highest})
    return Trend(
        width=TREND_W,
        height=TREND_H,
        top=top,
        bottom=bottom,
        left=left,
        right=right,
        y_ticks=[(y(t), t) for t in ticks],
        points=points,
        blocked_path=" ".join(f"{p.x},{p.blocked_y}" for p in points),
        ready_path=" ".join(f"{p.x},{p.ready_y}" for p in points),
    )


# The history page names this many of the pods that failed most, and of the runs with changes.
FAILING_NAMED = 20
_FAILED = (HostVerdict.BLOCKED, HostVerdict.NOT_CHECKED)
CHANGED_RUNS = 5


def _failing(runs: list[RunDigest], pods: list[str]) -> list[FailingPod]:
    out = []
    for pod in pods:
        states = [(run, run.pods[pod]) for run in runs if pod in run.pods]
        failed = [run for run, st in states if st.verdict in _FAILED]
        if not failed:
            continue
        last = states[-1][1]
        out.append(
            FailingPod(
                pod=pod,
                provider_id=last.provider_id,
                seen=len(states),
                blocked=sum(1 for _, st in states if st.verdict is HostVerdict.BLOCKED),
                not_checked=sum(1 for _, st in states if st.verdict is HostVerdict.NOT_CHECKED),
                warned=sum(1 for _, st in states if st.verdict is HostVerdict.WARNINGS),
                last_verdict=_verdict_class(last.verdict),
                last_failed=_when(failed[-1].generated_at),
                top_checks=_top_blockers([st for _, st in states]),
            )
        )
    out.sort(key=lambda f: (-(f.blocked + f.not_checked), -f.blocked, f.pod))
    return out[:FAILING_NAMED]


def _top_blockers(states: list[PodRun]) -> list[tuple[str, int]]:
    checks: dict[str, int] = {}
    for st in states:
        for check, severity in st.problems:
            if severity is Severity.BLOCK:
                checks[check] = checks.get(check, 0) + 1
    return sorted(checks.items(), key=lambda kv: (-kv[1], kv[0]))[:3]


def _failing_machines(runs: list[RunDigest]) -> list[FailingMachine]:
    """Per provider machine id (RunPod machineId, Vast machine_id): every run of every pod on
    it, so a host that fails whichever pod lands there stands out."""
    seen: dict[tuple[str, str], list[tuple[RunDigest, str, PodRun]]] = {}
    for run in runs:
        for pod, st in run.pods.items():
            if st.machine is not None:
                seen.setdefault(st.machine, []).append((run, pod, st))
    out = []
    for (provider, machine_id), visits in seen.items():
        failed = [(run, st) for run, _, st in visits if st.verdict in _FAILED]
        if not failed:
            continue
        out.append(
            FailingMachine(
                provider=provider,
                machine_id=machine_id,
                pods=list(dict.fromkeys(pod for _, pod, _ in reversed(visits))),
                pod_runs=len(visits),
                failed=len(failed),
                top_checks=_top_blockers([st for _, _, st in visits]),
                last_failed=_when(failed[-1][0].generated_at),
            )
        )
    out.sort(key=lambda m: (-m.failed, -m.failed / m.pod_runs, m.provider, m.machine_id))
    return out[:FAILING_NAMED]


def _history_page(runs: list[RunDigest]) -> HistoryPage:
    newest = runs[-1]
    s = newest.summary
    pods = _pod_order(runs)
    verdict = _RUN_VERDICT[s.verdict]
    changed = [(run, run.changes) for run in reversed(runs) if run.changes is not None and not run.changes.empty]
    return HistoryPage(
        title="ComputeFence pool history",
        runs=len(runs),
        first=_when(runs[0].generated_at),
        last=_when(newest.generated_at),
        verdict=verdict,
        verdict_word=views.run_verdict_word(s.verdict, newest.fail_on),
        verdict_mark={"blocked": "✖", "warnings": "⚠", "ready": "✔"}[verdict],
        counts=views.pod_counts(s),
        ready=[name for name, st in newest.pods.items() if st.verdict is HostVerdict.READY],
        matrix=_matrix(runs, pods),
        trend=_trend(runs),
        newest_changes=[
            RunChanges(_when(run.generated_at), views.changes_count_line(changes), change_views(changes))
            for run, changes in changed[:CHANGED_RUNS]
        ],
        failing=_failing(runs, pods),
        machines=_failing_machines(runs),
        machine_ids_seen=any(st.machine is not None for run in runs for st in run.pods.values()),
    )


class HtmlRenderer(Renderer):
    """`--format html`: one self-contained page."""

    def render(self, report: Report) -> str:
        return render(report)
