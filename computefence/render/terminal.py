"""The human report (rich). Every string from a pod goes in as Text, never as markup.

Laid out for the terminal's width: below WIDE the pod table shortens its headers and drops
Provider, then torch/CUDA (or stacks each pod over two lines), and a finding's message goes
under its check id instead of beside it. Text wraps between words only (columns.Hanging): a
path or host longer than the line stands whole on its own line, and a `fix:` command is
never wrapped, so both are copied back exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.console import RenderableType
from rich.text import Text

from computefence.evaluate.checks.areas import area_title
from computefence.models import Changes, Finding, Fix, HostReport, HostStatus, Report, Severity
from computefence.render import views
from computefence.render.columns import Column, Hanging, fit_table, records, wrap
from computefence.render.console import console_text
from computefence.render.interface import Renderer
from computefence.text import clean, one_line, plural

# From this width on, a finding's message sits beside its check id.
WIDE = 100

_STYLE = {Severity.BLOCK: "bold red", Severity.WARN: "yellow", Severity.PASS: "green", Severity.SKIP: "dim"}
_MARK = {Severity.BLOCK: "✗ BLOCK", Severity.WARN: "! WARN ", Severity.PASS: "✓ pass ", Severity.SKIP: "- skip "}
# "fix:" and "note:" end in the same column, so commands line up under each other.
_FIX_LABEL = "        fix: "
_NOTE_LABEL = "       note: "
_STATE_STYLE = {"blocked": "bold red", "warnings": "yellow", "ready": "green"}
_VERDICT_STYLE = {
    Severity.BLOCK: "bold white on red",
    Severity.WARN: "bold black on yellow",
    Severity.PASS: "bold black on green",
}
_INTERRUPTED_STYLE = "bold white on magenta"


def render(
    report: Report, *, color: bool = False, width: int = 100, group_by: str = "check", quiet: bool = False
) -> str:
    """`group_by` "pod" lists each pod with its verdict and its fixes in order; `quiet` only
    the verdict and what is not ready (for cron mail)."""
    return console_text(_renderables(report, width, group_by, quiet), color=color, width=width)


def live_renderables(report: Report, width: int = 100, footer: str = "") -> list[RenderableType]:
    """fleet watch's live screen, short enough for a terminal: the title and `footer`, what
    changed since the last pass, the watch table, then one line per finding (its check, pod
    and message cut to the width). The full report with fixes is --once's."""
    out: list[RenderableType] = [
        Text.assemble(
            ("ComputeFence fleet watch", "bold"),
            f" · {plural(len(report.hosts), 'pod')}",
            (f" · {clean(report.generated_at)}", "dim"),
        )
    ]
    if footer:
        out.append(Text(footer, style="dim"))
    if report.changes is not None and not report.changes.empty:
        out.append(Text(clean(views.changes_count_line(report.changes))))
    out.extend(_watch_table(report.hosts, width))
    for host in views.hosts_worst_first(report.hosts):
        if host.status is not HostStatus.OK:
            out.append(Text(one_line(f"{host.name}: {host.status.value}: {host.reason or ''}", width), style="magenta"))
            continue
        for finding in sorted(host.findings, key=lambda f: -f.severity.rank):
            if finding.severity in (Severity.BLOCK, Severity.WARN):
                line = f"{_MARK[finding.severity]} {finding.check} {host.name}: {finding.message}"
                out.append(Text(one_line(clean(line), max(20, width - 1)), style=_STYLE[finding.severity]))
    out.append(_verdict(report))
    return out


def render_changes(changes: Changes, *, color: bool = False, width: int = 100) -> str:
    """`report diff`: the 'Since the last run' section alone."""
    return console_text(changes_section(changes, width), color=color, width=width)


def _renderables(report: Report, width: int, group_by: str, quiet: bool) -> list[RenderableType]:
    if quiet:
        return _quiet(report, width)
    out = _fleet(report, width, group_by) if report.kind in views.FLEET_KINDS else _single(report, width)
    applied = views.applied_line(report)
    return out + [Text(clean(applied), style="dim")] if applied else out


# ---------------------------------------------------------------- one machine


def _single(report: Report, width: int) -> list[RenderableType]:
    out: list[RenderableType] = []
    title = "ComputeFence doctor" if report.kind == "doctor" else f"ComputeFence {clean(report.kind)}"
    for host in report.hosts:
        out.append(Text.assemble((title, "bold"), " · ", clean(host.name), (f" · {clean(report.generated_at)}", "dim")))
        line = views.machine_line(host)
        if line:
            out.append(Text(clean(line), style="dim"))
        out.append(Text())
        if host.status is not HostStatus.OK:
            out.extend(_not_ok_rows([host], width))
            out.append(Text())
        for area, findings in views.by_area(host.findings):
            out.append(_area_heading(area, findings))
            out.extend(_findings_rows(findings, width))
            out.append(Text())
    out.append(_verdict(report))
    return out


def _area_heading(area: str, findings: list[Finding]) -> Text:
    counts = views.severity_counts(findings)
    text = Text(area_title(area), style="bold underline")
    text.append("  ")
    parts = [
        (plural(counts[Severity.BLOCK], "blocker"), _STYLE[Severity.BLOCK] if counts[Severity.BLOCK] else "dim"),
        (plural(counts[Severity.WARN], "warning"), _STYLE[Severity.WARN] if counts[Severity.WARN] else "dim"),
        (f"{counts[Severity.PASS]} passed", "green" if counts[Severity.PASS] else "dim"),
    ]
    if counts[Severity.SKIP]:
        parts.append((f"{counts[Severity.SKIP]} skipped", "dim"))
    for i, (label, style) in enumerate(parts):
        if i:
            text.append(" · ", style="dim")
        text.append(label, style=style)
    return text


def _findings_rows(findings: list[Finding], width: int) -> list[RenderableType]:
    check_width = max(len(clean(f.check)) for f in findings)
    out: list[RenderableType] = []
    for finding in findings:
        out.append(_row(finding.severity, finding.check, Text(clean(finding.message)), check_width, width))
        if finding.fix is not None and views.has_fix(finding):
            out.extend(_fix(finding.fix))
    return out


def _row(severity: Severity, check: str, body: Text, check_width: int, width: int) -> Hanging:
    mark = Text(_MARK[severity] + " ", style=_STYLE[severity])
    label = Text.assemble(mark, (clean(check).ljust(check_width), "cyan"), " ")
    longest = max((cell_len(word) for word in body.plain.split()), default=0)
    if width < WIDE or longest > width - label.cell_len:
        # Narrow, or a path too long to sit beside the check id: the message under the check
        # id, with the whole line for itself.
        return Hanging(mark, Text.assemble((clean(check), "cyan"), "\n", body))
    return Hanging(label, body)


def _label_width(labels: Iterable[str], width: int) -> int:
    """A label column as wide as its widest label, but at most a third of the line: a longer
    (hostile) pod name takes its own room rather than pushing every row's text off the line."""
    return min(max((cell_len(label) for label in labels), default=0), width // 3)


def _fix(fix: Fix) -> list[RenderableType]:
    """One `fix:` line per command, then the advice as a `note:`. A step that is not a safe pod
    step carries its mark as a trailing shell comment (`# local`, `# inspect`, `# disruptive`)."""
    out: list[RenderableType] = []
    for step in fix.steps:
        # Never wrapped by us: a command is copied into a shell, and a folded line would break it.
        text = Text(_FIX_LABEL, style="bold", no_wrap=True)
        text.append(clean(step.run), style="bold bright_white")
        mark = views.step_mark(step)
        if mark:
            text.append(f"  # {mark}", style="yellow" if step.kind.value in ("disruptive", "destructive") else "dim")
        out.append(text)
    if fix.advice:
        out.append(_note(Text(clean(fix.advice))))
    return out


def _note(advice: Text) -> Hanging:
    """Prose under itself, beside its `note:` label."""
    return Hanging(Text(_NOTE_LABEL, style="dim"), advice)


# ---------------------------------------------------------------- fleet


def _fleet(report: Report, width: int, group_by: str) -> list[RenderableType]:
    s = report.summary
    out: list[RenderableType] = [
        Text.assemble(
            (f"ComputeFence fleet {'watch' if report.kind == 'watch' else 'check'}", "bold"),
            f" · {plural(s.hosts, 'pod')}",
            (f" · {clean(report.generated_at)}", "dim"),
        )
    ]
    if report.changes is not None:
        out += changes_section(report.changes, width)
    for source in views.failed_sources(report):
        out.append(
            Text(f"source {one_line(source.name)} failed: {one_line(source.error or 'unknown error')}", style="red")
        )
    for source in report.sources:
        if source.ok and source.resolver:
            out.append(Text(f"{one_line(source.name)}: read by {one_line(source.resolver)}", style="dim"))
    out.extend(_watch_table(report.hosts, width) if report.kind == "watch" else _summary_table(report.hosts, width))

    if group_by == "pod":
        out.extend(_by_pod(report, width))
    else:
        groups = views.group_findings(report.hosts)
        if groups:
            out.append(Text("Findings across pods", style="bold underline"))
            out.extend(_group_rows(groups, width))
            out.append(Text())

    not_ok = views.not_ok_hosts(report)
    if not_ok and group_by != "pod":
        out.append(Text("Pods not checked", style="bold underline"))
        out.extend(_not_ok_rows(not_ok, width))
        out.append(Text())

    if report.drift:
        out.append(Text("Version drift", style="bold underline"))
        out.extend(_drift(report, width))
        out.append(Text())

    out.extend(_perf(report, width))
    out.extend(_give_back(report, width))

    money = views.money_line(report)
    if money:
        out.append(Text.assemble(("Money at risk: ", "bold"), (money, "bold red" if s.cost_per_hour_at_risk else "")))
    out.append(_verdict(report))
    ready = views.ready_line(report)
    if ready:
        out.append(Text(clean(ready), style="green"))
    return out


_CHANGE_STYLE = {True: "bold red", False: "green", None: ""}


def changes_section(changes: Changes, width: int) -> list[RenderableType]:
    """'Since the last run (time)': one row per change, fixes under new findings."""
    out: list[RenderableType] = [
        Text(views.since_title(changes), style="bold underline"),
        Text(views.changes_count_line(changes)),
    ]
    lines = views.change_lines(changes)
    if lines:
        label_width = max(len(line.label) for line in lines)
        host_width = _label_width((clean(line.host) for line in lines), width)
        for line in lines:
            label = Text.assemble(
                (line.label.ljust(label_width), _CHANGE_STYLE[line.worse]), " ", clean(line.host).ljust(host_width), " "
            )
            out.append(Hanging(label, Text(clean(line.text))))
            if line.fix:
                out.extend(_fix(line.fix))
    out.append(Text())
    return out


_POD_COLUMNS = [
    Column("Pod"),
    Column("Provider", "Prov.", drop=1),
    Column("GPUs", breaks=" "),
    Column("torch / CUDA", "torch", breaks=" ", drop=2),
    Column("Status"),
    Column("Blockers", "Blk", justify="right"),
    Column("Warnings", "Warn", justify="right"),
]


def _summary_table(hosts: list[HostReport], width: int) -> list[RenderableType]:
    rows = []
    for host in hosts:
        state = views.host_state(host)
        checked = host.status is HostStatus.OK
        rows.append(
            [
                Text(clean(host.name)),
                Text(clean(views.provider_cell(host))),
                Text(clean(views.gpu_cell(host))),
                Text(clean(views.torch_cell(host))),
                Text(state, style=_STATE_STYLE.get(state, "bold magenta")),
                Text(str(host.blockers) if checked else "-", style="bold red" if host.blockers else ""),
                Text(str(host.warnings) if checked else "-", style="yellow" if host.warnings else ""),
            ]
        )
    table = fit_table(_POD_COLUMNS, rows, width, noun="pod")
    if table is not None:
        return [*table, Text()]
    return [*(line for host in hosts for line in _stacked_pod(host, width)), Text()]


_WATCH_COLUMNS = [
    Column("Pod"),
    Column("Step"),
    Column("Pace", breaks=", ", drop=1),
    Column("Loss"),
    Column("GPU util", "GPU"),
    Column("Newest checkpoint", "Checkpoint", breaks=" ", drop=2),
    Column("Status"),
]


def _watch_table(hosts: list[HostReport], width: int) -> list[RenderableType]:
    """fleet watch's pod table: step, pace, loss, GPU utilisation, newest checkpoint."""
    rows = []
    for host in hosts:
        state = views.host_state(host)
        cells = views.watch_cells(host)
        rows.append(
            [
                Text(clean(host.name)),
                *(Text(clean(cell)) for cell in cells),
                Text(views.watch_state(host), style=_STATE_STYLE.get(state, "bold magenta")),
            ]
        )
    table = fit_table(_WATCH_COLUMNS, rows, width, noun="pod")
    if table is not None:
        return [*table, Text()]
    return [*records(_WATCH_COLUMNS, rows, width), Text()]


def _stacked_pod(host: HostReport, width: int) -> list[Text]:
    """The pod table's row for a terminal too narrow for columns: name and state, then the
    machine, wrapped between its parts."""
    state = views.host_state(host)
    head = Text.assemble((clean(host.name), "bold"), "  ", (state, _STATE_STYLE.get(state, "bold magenta")))
    if host.status is HostStatus.OK:
        head.append(f"  {plural(host.blockers, 'blocker')}, {plural(host.warnings, 'warning')}")
    parts = [views.gpu_cell(host), views.torch_cell(host), views.provider_cell(host)]
    machine = " · ".join(clean(p) for p in parts if p and p != "-")
    return [head, *(Text("  " + line, style="dim") for line in wrap(machine, width - 2, " · ") if line)]


def _by_pod(report: Report, width: int) -> list[RenderableType]:
    """Per pod that is not ready: its verdict, then each problem with its fix commands, in
    the order to run them. Ready pods are named once at the end."""
    out: list[RenderableType] = [Text("Pods", style="bold underline")]
    for host in views.hosts_worst_first(report.hosts):
        if host.status is HostStatus.OK and not host.blockers and not host.warnings:
            continue
        state = views.host_state(host)
        head = Text.assemble((clean(host.name), "bold"), " · ", (state, _STATE_STYLE.get(state, "bold magenta")))
        if host.status is HostStatus.OK:
            head.append(f" · {plural(host.blockers, 'blocker')}, {plural(host.warnings, 'warning')}")
        out.append(head)
        if host.status is not HostStatus.OK:
            out.append(Text("  " + one_line(host.reason or host.status.value)))
            if host.fix:
                out.extend(_fix(host.fix))
        problems = [f for f in host.findings if f.severity in (Severity.BLOCK, Severity.WARN)]
        out.extend(_findings_rows(sorted(problems, key=lambda f: -f.severity.rank), width) if problems else [])
        out.append(Text())
    return out


def _quiet(report: Report, width: int) -> list[RenderableType]:
    """The verdict, then one line per pod that is not ready (or, for one machine, per problem)."""
    out: list[RenderableType] = [_verdict(report)]
    if report.kind not in views.FLEET_KINDS:
        for host in report.hosts:
            for finding in sorted(host.findings, key=lambda f: -f.severity.rank):
                if finding.severity in (Severity.BLOCK, Severity.WARN):
                    out.append(
                        Text.assemble(
                            (_MARK[finding.severity], _STYLE[finding.severity]),
                            " ",
                            (clean(finding.check), "cyan"),
                            " ",
                            one_line(finding.message),
                        )
                    )
        return out
    rows: list[tuple[Text, Text, Text]] = []
    for host in views.hosts_worst_first(report.hosts):
        state = views.host_state(host)
        if state == "ready":
            continue
        if host.status is HostStatus.OK:
            what = ", ".join(
                dict.fromkeys(f.check for f in host.findings if f.severity in (Severity.BLOCK, Severity.WARN))
            )
        else:
            what = one_line(host.reason or "")
        rows.append(
            (
                Text(clean(host.name), style="bold"),
                Text(state, style=_STATE_STYLE.get(state, "bold magenta")),
                Text(clean(what)),
            )
        )
    if not rows:
        return out
    name_width = _label_width((name.plain for name, _, _ in rows), width)
    state_width = max(cell.cell_len for _, cell, _ in rows)
    for name, state_text, problems in rows:
        name.pad_right(max(0, name_width - name.cell_len) + 2)
        state_text.pad_right(state_width - state_text.cell_len + 2)
        out.append(Hanging(Text.assemble(name, state_text), problems, under=2))
    return out


def _group_rows(groups: list[views.FindingGroup], width: int) -> list[RenderableType]:
    check_width = max(len(clean(g.check)) for g in groups)
    out: list[RenderableType] = []
    for group in groups:
        for variant in group.variants:
            body = Text(clean(variant.message))
            body.append(f"\n{plural(len(variant.pods), 'pod')}:", style="bold")
            per_pod = len(variant.subjects) > 1  # one line per pod with its own value
            body.append(("\n  " if per_pod else " ") + clean(views.hosts_with_subjects(variant, sep="\n  ")))
            out.append(_row(group.severity, group.check, body, check_width, width))
            if variant.fix:
                out.extend(_fix(variant.fix))
    return out


def _not_ok_rows(hosts: list[HostReport], width: int) -> list[RenderableType]:
    name_width = _label_width((clean(h.name) for h in hosts), width)
    out: list[RenderableType] = []
    for host in hosts:
        label = Text.assemble(
            (host.status.value.ljust(len("host_key_mismatch")), "bold magenta"),
            " ",
            clean(host.name).ljust(name_width),
            " ",
        )
        out.append(Hanging(label, Text(clean(host.reason or host.status.value))))
        if host.fix:
            out.extend(_fix(host.fix))
    return out


def _give_back(report: Report, width: int) -> list[RenderableType]:
    rows = views.give_back_rows(report)
    if not rows:
        return []
    out: list[RenderableType] = [Text(clean(views.give_back_title(report)), style="bold underline")]
    shown = rows[: views.GIVE_BACK_NAMED]
    name_width = _label_width((clean(row.name) for row in shown), width)
    cost_width = max(len(row.cost) for row in shown)
    for row in shown:
        label = Text.assemble(
            (clean(row.name).ljust(name_width), "bold"), "  ", (row.cost.rjust(cost_width), "bold red"), "  "
        )
        out.append(Hanging(label, Text(clean(row.checks), style="cyan"), under=2))
    if len(rows) > len(shown):
        out.append(Text(f"and {len(rows) - len(shown)} more", style="dim"))
    out += [_note(Text(views.GIVE_BACK_NOTE)), Text()]
    return out


def _perf(report: Report, width: int) -> list[RenderableType]:
    figures = views.perf_figures(report)
    if not figures:
        return []
    out: list[RenderableType] = [Text(views.PERF_TITLE, style="bold underline")]
    for figure in figures:
        median = f"median {views.perf_number(figure.median)} {figure.unit}"
        out.append(Hanging(Text(f"{clean(figure.check)}  "), Text(f"{clean(figure.model)} · {median}", style="cyan")))
        name_width = _label_width((clean(row.pod) for row in figure.rows), width)
        for row in figure.rows:
            low = row.share < 0.9
            out.append(
                Text.assemble(
                    "  ",
                    clean(row.pod).ljust(name_width),
                    "  ",
                    (f"{views.perf_number(row.value)} {figure.unit}", "bold red" if low else ""),
                    (f"  {row.share:.0%} of the median", "red" if low else "dim"),
                )
            )
    out.append(Text())
    return out


_DRIFT_COLUMNS = [Column("Component", breaks=" "), Column("Version"), Column("Pods", breaks=", ")]


def _drift(report: Report, width: int) -> list[RenderableType]:
    """A table where one fits (a pod list wraps between pods), else each component over lines."""
    rows = [
        [Text(clean(row.component) if i == 0 else "", style="cyan"), Text(clean(version)), Text(clean(pods))]
        for row in report.drift
        for i, (version, pods) in enumerate(views.drift_cells(row.values))
    ]
    table = fit_table(_DRIFT_COLUMNS, rows, width)
    if table is not None:
        return list(table)
    out: list[RenderableType] = []
    for row in report.drift:
        out.append(Text(clean(row.component), style="cyan"))
        for version, pods in views.drift_cells(row.values):
            out.append(Hanging(Text(f"  {clean(version)}  "), Text(clean(pods)), indent=4))
    return out


def _verdict(report: Report) -> Text:
    verdict = report.summary.verdict
    style = _INTERRUPTED_STYLE if report.interrupted else _VERDICT_STYLE[verdict]
    text = Text(f" {views.verdict_word(report)} ", style=style)
    text.append(" " + clean(views.verdict_detail(report)))
    if report.kind not in views.FLEET_KINDS and verdict is Severity.BLOCK:
        text.append(". Fix the blockers above before starting the job.")
    return text


class TerminalRenderer(Renderer):
    """`--format rich`: the report for a person at a terminal."""

    colors = True
    shows_changes = True

    def render(self, report: Report) -> str:
        return render(report, color=self.color, width=self.width, group_by=self.group_by, quiet=self.quiet)

    def render_changes(self, changes: Changes) -> str:
        return render_changes(changes, color=self.color, width=self.width)
