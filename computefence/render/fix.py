"""The `fleet fix` / `doctor --fix` report: the plan (each pod's script, then what will not run
and why) or what ran and each finding's outcome after the re-probe. Text or JSON.

Command lines are never folded (they are copied into a shell); pod strings are cleaned of
control characters like every report's.
"""

from __future__ import annotations

import textwrap

from computefence.models import FixHost, FixReport, StepRecord
from computefence.text import clean, one_line, plural

FORMATS = ("rich", "json")
_OUTCOME = {
    "fixed": "✓ fixed",
    "still_failing": "✗ still failing",
    "failed": "✗ failed",
    "skipped": "- skipped",
    "planned": "→ planned",
    "new": "✗ new",
}
_STATUS = {"ran": "ran", "failed": "FAILED", "timeout": "TIMEOUT", "skipped": "skipped", "planned": "run"}


def render_fix(report: FixReport, fmt: str, width: int = 100, *, asking: bool = False) -> str:
    """`asking`: the plan shown before the question of --apply, which needs no hint to add it."""
    if fmt == "json":
        return report.model_dump_json(indent=2) + "\n"
    return _text(report, max(60, width), asking)


def _text(report: FixReport, width: int, asking: bool = False) -> str:
    mode = "apply" if report.applied else "plan"
    lines = [f"ComputeFence fix · {mode} · {plural(len(report.hosts), 'pod')} · {report.generated_at}", ""]
    for host in report.hosts:
        lines += _host(host, report.applied, width)
    lines += _summary(report, asking)
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int, indent: str) -> list[str]:
    # Between words only: a path or host longer than the line stays whole (the terminal wraps it).
    lines = textwrap.wrap(
        clean(text),
        width=width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [indent]


def _host(host: FixHost, applied: bool, width: int) -> list[str]:
    name = clean(host.name)
    if host.reason and not host.results:
        return [f"{name}: not checked ({host.status.value})", *_wrap(host.reason, width, "  "), ""]
    to_run = [s for s in host.steps if s.status == "planned"]
    if not host.results:
        return [f"{name}: nothing to do", ""]
    lines = [f"{name}: {plural(len(host.results), 'finding')}, {_count(host, applied, to_run)}"]
    if host.same_pod:
        how = "run" if applied else "would run"
        lines += _wrap(
            f"one pod named {', '.join(host.same_pod)}: its steps {how} once, under {host.same_pod[0]}", width, "  "
        )
    if host.refused:
        lines += _wrap(f"refused: {host.refused}", width, "  ")
    if not applied:
        if to_run:
            lines.append("  would run, in order:")
            lines += [f"    {clean(s.run)}" for s in to_run]
        held = [s for s in host.steps if s.status == "skipped"]
        if held:
            lines.append("  will not run:")
            for step in held:
                lines.append(f"    {clean(step.run)}")
                lines += _wrap(f"{step.check} ({step.kind.value}, {step.on.value}): {step.reason}", width, "      ")
    else:
        for step in host.steps:
            if (
                step.status == "skipped"
                and step.reason
                and ("only shows" in step.reason or "your machine" in step.reason)
            ):
                continue  # inspect and local steps: in the plan, not worth a line after an apply
            took = f" {step.duration_s:.1f} s" if step.duration_s is not None else ""
            exit_text = f" exit {step.exit}" if step.exit not in (None, 0) else ""
            lines.append(f"  [{_STATUS[step.status]}{exit_text}{took}] {clean(step.run)}")
            if step.reason and step.status != "ran":
                lines += _wrap(step.reason, width, "      ")
    for result in host.results:
        subject = f" {result.subject}" if result.subject else ""
        lines.append(f"  {_OUTCOME[result.outcome]:<16} {clean(result.check)}{clean(subject)}")
        if result.reason and result.outcome != "planned":
            lines += _wrap(result.reason, width, "      ")
        if result.output_tail and result.outcome in ("failed", "still_failing"):
            tail = result.output_tail.strip().splitlines()[-5:]
            lines += [f"      | {one_line(line, width - 8)}" for line in tail]
    lines.append("")
    return lines


def _count(host: FixHost, applied: bool, to_run: list[StepRecord]) -> str:
    if not applied:
        return f"{plural(len(to_run), 'step')} to run"
    ran = sum(1 for s in host.steps if s.status in ("ran", "failed", "timeout"))
    return f"{plural(ran, 'step')} run"


def _summary(report: FixReport, asking: bool = False) -> list[str]:
    s = report.summary
    if not report.applied:
        parts = [f"{plural(s.planned, 'finding')} with steps to run", f"{s.skipped} not fixable by fleet fix"]
        pods = sum(1 for h in report.hosts if any(x.status == "planned" for x in h.steps))
        line = f"PLAN  {plural(report.step_count, 'step')} on {plural(pods, 'pod')}: " + ", ".join(parts)
        if s.not_checked:
            line += f", {plural(s.not_checked, 'pod')} not checked"
        if not report.step_count:
            tail = ["nothing to run"]
        else:
            tail = ["nothing was changed yet" if asking else "nothing was changed; --apply runs the steps"]
        return [line, *tail]
    parts = [f"{s.fixed} fixed", f"{s.still_failing} still failing", f"{s.failed} failed", f"{s.skipped} skipped"]
    if s.new:
        parts.append(f"{s.new} new")
    if s.not_checked:
        parts.append(f"{plural(s.not_checked, 'pod')} not checked")
    verdict = "FIXED" if report.exit_code() == 0 else "NOT FIXED"
    if report.interrupted:
        verdict = "INTERRUPTED"
    return [f"{verdict}  " + ", ".join(parts)]
