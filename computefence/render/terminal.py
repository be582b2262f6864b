"""The human report (rich). Every string from a pod goes in as Text, never as markup."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from computefence.models import Changes, Finding, Fix, HostReport, HostStatus, Report, Severity
from computefence.render import views
from computefence.render.views import clean

_STYLE = {Severity.BLOCK: "bold red", Severity.WARN: "yellow", Severity.PASS: "green", Severity.SKIP: "dim"}
_MARK = {Severity.BLOCK: "✗ BLOCK", Severity.WARN: "! WARN ", Severity.PASS: "✓ pass ", Severity.SKIP: "- skip "}
# "fix:" and "note:" end in the same column, so commands line up under each other.
_FIX_LABEL = "        fix: "
_NOTE_LABEL = "       note: "
_STATE_STYLE = {"blocked": "bold red", "warnings": "yellow", "ready": "green"}
_VERDICT_STYLE = {Severity.BLOCK: "bold white on red", Severity.WARN: "bold black on yellow", Severity.PASS: "bold black on green"}


def render(report: Report, *, color: bool = False, width: int = 100) -> str:
    return _print(_renderables(report), color=color, width=width)


def render_changes(changes: Changes, *, color: bool = False, width: int = 100) -> str:
    """`report diff`: the 'Since the last run' section alone."""
    return _print(changes_section(changes), color=color, width=width)


def _print(renderables: list[RenderableType], *, color: bool, width: int) -> str:
    console = Console(
        file=io.StringIO(),
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    for renderable in renderables:
        # no_wrap Text (fix commands) goes out unfolded; the terminal wraps it softly.
        console.print(renderable, soft_wrap=isinstance(renderable, Text) and bool(renderable.no_wrap))
    text = console.file.getvalue()
    # Cells are padded to the width; plain output (files, pipes) should not carry that.
    return text if color else "\n".join(line.rstrip() for line in text.split("\n"))


def _renderables(report: Report) -> list[RenderableType]:
    out = _fleet(report) if report.kind == "fleet" else _single(report)
    applied = views.applied_line(report)
    return out + [Text(clean(applied), style="dim")] if applied else out


# ---------------------------------------------------------------- one machine


def _single(report: Report) -> list[RenderableType]:
    out: list[RenderableType] = []
    title = "ComputeFence doctor" if report.kind == "doctor" else f"ComputeFence {clean(report.kind)}"
    for host in report.hosts:
        out.append(Text.assemble((title, "bold"), " · ", clean(host.name), (f" · {clean(report.generated_at)}", "dim")))
        line = views.machine_line(host)
        if line:
            out.append(Text(clean(line), style="dim"))
        out.append(Text())
        if host.status is not HostStatus.OK:
            out.extend(_not_ok_rows([host]))
            out.append(Text())
        for area, findings in views.by_area(host.findings):
            out.append(_area_heading(area, findings))
            out.extend(_findings_rows(findings))
            out.append(Text())
    out.append(_verdict(report))
    return out


def _area_heading(area: str, findings: list[Finding]) -> Text:
    counts = views.severity_counts(findings)
    text = Text(views.area_title(area), style="bold underline")
    text.append("  ")
    parts = [
        (views.plural(counts[Severity.BLOCK], "blocker"), _STYLE[Severity.BLOCK] if counts[Severity.BLOCK] else "dim"),
        (views.plural(counts[Severity.WARN], "warning"), _STYLE[Severity.WARN] if counts[Severity.WARN] else "dim"),
        (f"{counts[Severity.PASS]} passed", "green" if counts[Severity.PASS] else "dim"),
    ]
    if counts[Severity.SKIP]:
        parts.append((f"{counts[Severity.SKIP]} skipped", "dim"))
    for i, (label, style) in enumerate(parts):
        if i:
            text.append(" · ", style="dim")
        text.append(label, style=style)
    return text


def _findings_rows(findings: list[Finding]) -> list[RenderableType]:
    width = max(len(clean(f.check)) for f in findings)
    out: list[RenderableType] = []
    for finding in findings:
        out.append(_row(finding.severity, finding.check, Text(clean(finding.message)), width))
        if views.has_fix(finding):
            out.extend(_fix(finding.fix))
    return out


def _row(severity: Severity, check: str, body: Text, check_width: int) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True, style="cyan", min_width=check_width)
    grid.add_column(ratio=1, overflow="fold")  # long paths wrap, never cut
    grid.add_row(Text(_MARK[severity], style=_STYLE[severity]), Text(clean(check)), body)
    return grid


def _fix(fix: Fix) -> list[RenderableType]:
    """One `fix:` line per command, then the advice as a `note:`."""
    out: list[RenderableType] = []
    for command in fix.commands:
        # Never wrapped by us: a command is copied into a shell, and a folded line would break it.
        text = Text(_FIX_LABEL, style="bold", no_wrap=True)
        text.append(clean(command), style="bold bright_white")
        out.append(text)
    if fix.advice:
        grid = Table.grid()
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1)  # prose wraps at word boundaries, under itself
        grid.add_row(Text(_NOTE_LABEL, style="dim"), Text(clean(fix.advice)))
        out.append(grid)
    return out


# ---------------------------------------------------------------- fleet


def _fleet(report: Report) -> list[RenderableType]:
    s = report.summary
    out: list[RenderableType] = [
        Text.assemble(("ComputeFence fleet check", "bold"), f" · {views.plural(s.hosts, 'pod')}", (f" · {clean(report.generated_at)}", "dim"))
    ]
    if report.changes is not None:
        out += changes_section(report.changes)
    for source in views.failed_sources(report):
        out.append(Text(f"source {views.one_line(source.name)} failed: {views.one_line(source.error or 'unknown error')}", style="red"))
    for source in report.sources:
        if source.ok and source.resolver:
            out.append(Text(f"{views.one_line(source.name)}: read by {views.one_line(source.resolver)}", style="dim"))
    out.append(_summary_table(report.hosts))

    groups = views.group_findings(report.hosts)
    if groups:
        out.append(Text("Findings across pods", style="bold underline"))
        out.extend(_group_rows(groups))
        out.append(Text())

    not_ok = views.not_ok_hosts(report)
    if not_ok:
        out.append(Text("Pods not checked", style="bold underline"))
        out.extend(_not_ok_rows(not_ok))
        out.append(Text())

    if report.drift:
        out.append(Text("Version drift", style="bold underline"))
        out.append(_drift_table(report))
        out.append(Text())

    money = views.money_line(report)
    if money:
        out.append(Text.assemble(("Money at risk: ", "bold"), (money, "bold red" if s.cost_per_hour_at_risk else "")))
    out.append(_verdict(report))
    return out


_CHANGE_STYLE = {True: "bold red", False: "green", None: ""}


def changes_section(changes: Changes) -> list[RenderableType]:
    """'Since the last run (time)': one row per change, fixes under new findings."""
    out: list[RenderableType] = [Text(views.since_title(changes), style="bold underline"),
                                 Text(views.changes_count_line(changes))]
    lines = views.change_lines(changes)
    if lines:
        label_width = max(len(line.label) for line in lines)
        host_width = max(len(clean(line.host)) for line in lines)
        for line in lines:
            grid = Table.grid(padding=(0, 1))
            grid.add_column(no_wrap=True, min_width=label_width)
            grid.add_column(no_wrap=True, min_width=host_width)
            grid.add_column(ratio=1, overflow="fold")
            grid.add_row(Text(line.label, style=_CHANGE_STYLE[line.worse]), Text(clean(line.host)), Text(line.text))
            out.append(grid)
            if line.fix:
                out.extend(_fix(line.fix))
    out.append(Text())
    return out


def _summary_table(hosts: list[HostReport]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    table.add_column("Pod", no_wrap=True)
    for name in ("Provider", "GPUs", "torch / CUDA"):
        table.add_column(name, overflow="fold")
    table.add_column("Status", no_wrap=True)
    table.add_column("Blockers", justify="right")
    table.add_column("Warnings", justify="right")
    for host in hosts:
        state = views.host_state(host)
        checked = host.status is HostStatus.OK
        blockers = len(host.blockers)
        warnings = len(host.warnings)
        table.add_row(
            Text(clean(host.name)),
            Text(clean(views.provider_cell(host))),
            Text(clean(views.gpu_cell(host))),
            Text(clean(views.torch_cell(host))),
            Text(state, style=_STATE_STYLE.get(state, "bold magenta")),
            Text(str(blockers) if checked else "-", style="bold red" if blockers else ""),
            Text(str(warnings) if checked else "-", style="yellow" if warnings else ""),
        )
    return table


def _group_rows(groups: list[views.FindingGroup]) -> list[RenderableType]:
    width = max(len(clean(g.check)) for g in groups)
    out: list[RenderableType] = []
    for group in groups:
        for variant in group.variants:
            body = Text(clean(variant.message))
            body.append(f"\n{views.plural(len(variant.hosts), 'pod')}:", style="bold")
            per_pod = len(variant.subjects) > 1  # one line per pod with its own value
            body.append(("\n  " if per_pod else " ") + clean(views.hosts_with_subjects(variant, sep="\n  ")))
            out.append(_row(group.severity, group.check, body, width))
            if variant.fix:
                out.extend(_fix(variant.fix))
    return out


def _not_ok_rows(hosts: list[HostReport]) -> list[RenderableType]:
    width = max(len(clean(h.name)) for h in hosts)
    out: list[RenderableType] = []
    for host in hosts:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="bold magenta", min_width=len("host_key_mismatch"))
        grid.add_column(no_wrap=True, min_width=width)
        grid.add_column(ratio=1, overflow="fold")
        grid.add_row(Text(host.status.value), Text(clean(host.name)), Text(clean(host.reason or host.status.value)))
        out.append(grid)
        if host.fix:
            out.extend(_fix(host.fix))
    return out


def _drift_table(report: Report) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("Component", style="cyan", no_wrap=True)
    table.add_column("Version", overflow="fold")
    table.add_column("Pods", overflow="fold")
    for row in report.drift:
        for i, (version, pods) in enumerate(views.drift_cells(row.values)):
            table.add_row(
                Text(clean(row.component) if i == 0 else ""),
                Text(clean(version)),
                Text(clean(pods)),
            )
    return table


def _verdict(report: Report) -> Text:
    verdict = report.summary.verdict
    text = Text(f" {views.verdict_word(report)} ", style=_VERDICT_STYLE[verdict])
    text.append(" " + clean(views.verdict_detail(report)))
    if report.kind != "fleet" and verdict is Severity.BLOCK:
        text.append(". Fix the blockers above before starting the job.")
    return text
