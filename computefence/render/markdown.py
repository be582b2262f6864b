"""GitHub-flavoured Markdown for a CI step summary ($GITHUB_STEP_SUMMARY).

Strings from pods are escaped: HTML is neutralised, Markdown punctuation is
backslash-escaped, pipes cannot break a table, and code fences are longer than any
backtick run inside them.
"""

from __future__ import annotations

import re
import textwrap

from computefence.models import Changes, Finding, Fix, HostReport, HostStatus, Report, Severity
from computefence.render import views
from computefence.render.interface import Renderer
from computefence.text import clean, one_line, plural

_ICON = {Severity.BLOCK: "🛑", Severity.WARN: "⚠️", Severity.PASS: "✅", Severity.SKIP: "⏭️"}
_INTERRUPTED_ICON = "⏹️"
# Backslash-escaped: emphasis, code, links, tables, strikethrough, headings and
# GitHub's $math$ ('$7/h ... $2/h' would otherwise render as a formula).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#$])")
# GitHub refuses a step summary over 1 MiB (the whole summary is then lost): the report stops
# short of it, and no one value takes more than its share.
SUMMARY_LIMIT_BYTES = 1024 * 1024
_BUDGET_BYTES = SUMMARY_LIMIT_BYTES - 16 * 1024
MAX_VALUE_CHARS = 2000
MAX_BLOCK_CHARS = 20_000
CUT_MARK = " … (cut; the full text is in --format json)"


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + CUT_MARK


def md(text: object) -> str:
    """Inline text: safe in a paragraph and in a table cell."""
    text = _capped(clean(text), MAX_VALUE_CHARS).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return "<br>".join(line.strip() for line in text.splitlines()) if "\n" in text else text


def code_span(text: object) -> str:
    """Inline code, safe in a table cell (GFM splits cells on '|' even inside code)."""
    text = _capped(one_line(text), MAX_VALUE_CHARS).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_block(text: str, lang: str = "sh") -> str:
    text = _capped(clean(text), MAX_BLOCK_CHARS)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def render(report: Report, *, group_by: str = "check") -> str:
    """`group_by` "pod": each pod that is not ready with its fix commands in one block."""
    lines = _fleet(report, group_by) if report.kind in views.FLEET_KINDS else _single(report)
    return "\n".join(_within_budget(lines)).rstrip() + "\n"


def _within_budget(lines: list[str]) -> list[str]:
    """`lines` up to GitHub's step-summary limit; past it, a closing fence if one is open
    and a line saying how much was cut."""
    lines = "\n".join(lines).split("\n")  # a code block is one item with its lines inside
    used, fence = 0, None
    for index, line in enumerate(lines):
        used += len(line.encode()) + 1
        if used > _BUDGET_BYTES:
            kept = lines[:index] + ([fence] if fence else [])
            return [
                *kept,
                "",
                f"**Cut at GitHub's 1 MiB step-summary limit: {index} of {len(lines)} lines shown; "
                "the full report is in `--format json`.**",
            ]
        opener = re.match(r"(`{3,})", line)
        if opener and fence is None:
            fence = opener.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
    return lines


def _heading(report: Report, title: str) -> list[str]:
    ready = views.ready_line(report)
    return [
        f"## {_INTERRUPTED_ICON if report.interrupted else _ICON[report.summary.verdict]} {title}: "
        + views.verdict_word(report),
        "",
        md(views.verdict_detail(report)),
        "",
        *([md(ready), ""] if ready else []),
    ]


# ---------------------------------------------------------------- one machine


def _single(report: Report) -> list[str]:
    title = "ComputeFence doctor" if report.kind == "doctor" else f"ComputeFence {md(report.kind)}"
    lines = _heading(report, title)
    for host in report.hosts:
        lines += [f"**{md(host.name)}**: {md(views.machine_line(host))}", ""]
        if host.status is not HostStatus.OK:
            lines += _not_ok_table([host])
        if host.findings:
            lines += ["| | Check | Finding |", "|---|---|---|"]
            for _, findings in views.by_area(host.findings):
                for finding in findings:
                    lines.append(
                        f"| {_ICON[finding.severity]} {finding.severity.value} | {code_span(finding.check)} | {md(finding.message)} |"
                    )
            lines.append("")
        fixes = [f for f in host.findings if views.has_fix(f)]
        if fixes:
            lines += ["### Fixes", ""]
            for finding in sorted(fixes, key=lambda f: -f.severity.rank):
                lines += _fix(finding)
    lines += _generated(report)
    return lines


def _fix(finding: Finding) -> list[str]:
    return [f"{_ICON[finding.severity]} **{md(finding.check)}**: {md(finding.message)}", "", *fix_lines(finding.fix)]


def fix_lines(fix: Fix | None) -> list[str]:
    """Commands in one code block (they run in order), advice as a plain note after it."""
    lines: list[str] = []
    if fix and fix.steps:
        lines += [code_block("\n".join(views.marked_command(step) for step in fix.steps)), ""]
    if fix and fix.advice:
        lines += [f"*Note:* {md(fix.advice)}", ""]
    return lines


def _fix_cell(fix: Fix | None) -> str:
    if not fix:
        return ""
    parts = [
        code_span(step.run) + (f" *({views.step_mark(step)})*" if views.step_mark(step) else "") for step in fix.steps
    ]
    if fix.advice:
        parts.append(md(fix.advice))
    return "<br>".join(parts)


# ---------------------------------------------------------------- fleet


def _pod_table(report: Report) -> list[str]:
    lines = [
        "| Pod | Provider | GPUs | torch / CUDA | Status | Blockers | Warnings |",
        "|---|---|---|---|---|---:|---:|",
    ]
    for host in report.hosts:
        checked = host.status is HostStatus.OK
        lines.append(
            f"| {md(host.name)} | {md(views.provider_cell(host))} | {md(views.gpu_cell(host))} | "
            f"{md(views.torch_cell(host))} | {md(views.host_state(host))} | "
            f"{host.blockers if checked else '-'} | {host.warnings if checked else '-'} |"
        )
    return [*lines, ""]


def _watch_table(report: Report) -> list[str]:
    lines = [
        "| Pod | Step | Pace | Loss | GPU util | Newest checkpoint | Status |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for host in report.hosts:
        cells = " | ".join(md(cell) for cell in views.watch_cells(host))
        lines.append(f"| {md(host.name)} | {cells} | {md(views.watch_state(host))} |")
    return [*lines, ""]


def _fleet(report: Report, group_by: str) -> list[str]:
    lines = _heading(report, f"ComputeFence fleet {'watch' if report.kind == 'watch' else 'check'}")
    if report.changes is not None:
        lines += changes_section(report.changes)
    money = views.money_line(report)
    if money:
        lines += [f"**Money at risk:** {md(money)}", ""]
    for source in views.failed_sources(report):
        lines += [f"🛑 source **{md(source.name)}** failed: {md(source.error or 'unknown error')}", ""]

    lines += _watch_table(report) if report.kind == "watch" else _pod_table(report)

    groups = views.group_findings(report.hosts) if group_by != "pod" else []
    if group_by == "pod":
        lines += _by_pod(report)
    if groups:
        lines += ["### Findings across pods", ""]
        for group in groups:
            for variant in group.variants:
                pods = views.hosts_with_subjects(variant, sep="\n")  # one line per pod where values differ
                lines += [
                    f"{_ICON[group.severity]} **{md(group.check)}** ({plural(len(variant.pods), 'pod')}): {md(variant.message)}",
                    "",
                    f"Pods: {md(pods)}",
                    "",
                ]
                lines += fix_lines(variant.fix)

    not_ok = views.not_ok_hosts(report)
    if not_ok and group_by != "pod":
        lines += ["### Pods not checked", ""] + _not_ok_table(not_ok)

    if report.drift:
        lines += ["### Version drift", "", "| Component | Version | Pods |", "|---|---|---|"]
        for row in report.drift:
            for version, pods in views.drift_cells(row.values):
                lines.append(f"| {md(row.component)} | {md(version)} | {md(pods)} |")
        lines.append("")

    lines += _perf(report) + _give_back(report)

    checked = [h for h in report.hosts if h.facts is not None]
    if checked:
        lines += ["<details><summary>Per-pod details</summary>", ""]
        for host in checked:
            lines += [f"- **{md(host.name)}**: {md(views.machine_line(host))}"]
        lines += ["", "</details>", ""]
    lines += _generated(report)
    return lines


def _perf(report: Report) -> list[str]:
    figures = views.perf_figures(report)
    if not figures:
        return []
    lines = [
        f"### {md(views.PERF_TITLE)}",
        "",
        "| Check | GPU model | Pod | Figure | Of the median |",
        "|---|---|---|---|---|",
    ]
    for figure in figures:
        median = f"{views.perf_number(figure.median)} {figure.unit}"
        for row in figure.rows:
            figure_cell = f"{views.perf_number(row.value)} {figure.unit}"
            lines.append(
                f"| {md(figure.check)} | {md(figure.model)} (median {md(median)}) | {md(row.pod)} "
                f"| {md(figure_cell)} | {row.share:.0%} |"
            )
    return [*lines, ""]


def _give_back(report: Report) -> list[str]:
    rows = views.give_back_rows(report)
    if not rows:
        return []
    lines = [f"### {md(views.give_back_title(report))}", "", "| Pod | $/h | Blocked by |", "|---|---|---|"]
    lines += [f"| {md(row.name)} | {md(row.cost)} | {md(row.checks)} |" for row in rows]
    return [*lines, "", md(views.GIVE_BACK_NOTE), ""]


_CHANGE_ICON = {True: "🔴", False: "🟢", None: "•"}


def changes_section(changes: Changes) -> list[str]:
    lines = [f"### {md(views.since_title(changes))}", "", md(views.changes_count_line(changes)), ""]
    for line in views.change_lines(changes):
        lines.append(f"- {_CHANGE_ICON[line.worse]} {md(line.label)} **{md(line.host)}**: {md(line.text)}")
        if line.fix:
            lines += ["", *(textwrap.indent(text, "  ") for text in fix_lines(line.fix))]
    return lines + [""]


def _by_pod(report: Report) -> list[str]:
    """Per pod that is not ready: its verdict, its problems, and one block of its fix commands
    in order (the script to run on that pod), with the advice after it."""
    lines = ["### Pods", ""]
    for host in views.hosts_worst_first(report.hosts):
        problems = sorted(
            (f for f in host.findings if f.severity in (Severity.BLOCK, Severity.WARN)), key=lambda f: -f.severity.rank
        )
        if host.status is HostStatus.OK and not problems:
            continue
        state = views.host_state(host)
        lines += [f"#### {md(host.name)}: {md(state)}", ""]
        if host.status is not HostStatus.OK:
            lines += [md(one_line(host.reason or host.status.value)), ""]
        lines += [f"- {_ICON[f.severity]} {code_span(f.check)}: {md(f.message)}" for f in problems]
        if problems:
            lines.append("")
        fixes = [f.fix for f in problems if f.fix] + ([host.fix] if host.fix else [])
        commands = [views.marked_command(step) for fix in fixes for step in fix.steps]
        if commands:
            lines += [code_block("\n".join(commands)), ""]
        lines += [f"*Note:* {md(fix.advice)}" for fix in fixes if fix.advice]
        lines.append("")
    return lines


def _not_ok_table(hosts: list[HostReport]) -> list[str]:
    lines = ["| Pod | Status | Reason | Fix |", "|---|---|---|---|"]
    for host in hosts:
        lines.append(f"| {md(host.name)} | {md(host.status.value)} | {md(host.reason or '')} | {_fix_cell(host.fix)} |")
    return lines + [""]


def _generated(report: Report) -> list[str]:
    applied = views.applied_line(report)
    return [
        f"<sub>generated {md(report.generated_at)} by computefence {md(report.tool_version)}"
        + (f" · {md(applied)}" if applied else "")
        + "</sub>"
    ]


class MarkdownRenderer(Renderer):
    """`--format markdown`: for a PR comment or a wiki page."""

    shows_changes = True

    def render(self, report: Report) -> str:
        return render(report, group_by=self.group_by)

    def render_changes(self, changes: Changes) -> str:
        return "\n".join(changes_section(changes)).rstrip() + "\n"
