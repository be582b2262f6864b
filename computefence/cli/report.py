"""`computefence report FILE.json`: re-render a saved JSON report in any format; `report diff`
compares two, `report merge` joins shards into one."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

import typer

from computefence import evaluate, run
from computefence.cli.app import command_group
from computefence.cli.output import (
    FormatOpt,
    GroupBy,
    GroupByOpt,
    OutputFormat,
    QuietOpt,
    ReportFileOpt,
    emit,
    emit_text,
)
from computefence.cli.policy_options import NoPolicyOpt, PolicyOpt
from computefence.evaluate.changes import compare_reports, worsened
from computefence.evaluate.merge import merge_reports
from computefence.policy import resolve_policy
from computefence.render import CHANGES_FORMATS, render_changes
from computefence.saved_files import load_report

report_app = command_group(
    "report",
    "Re-render, compare or merge saved JSON reports. `computefence report FILE.json` is `report show FILE.json`.",
    default="show",
)


@report_app.command("show")
def report_command(
    path: Path = typer.Argument(..., metavar="FILE.json", help="A report saved with --format json."),
    fmt: FormatOpt = OutputFormat("rich"),
    output: ReportFileOpt = None,
    group_by: GroupByOpt = GroupBy("check"),
    quiet: QuietOpt = False,
    policy: PolicyOpt = None,
    no_policy: NoPolicyOpt = False,
) -> int:
    """Re-render a saved JSON report; exits with that run's exit status (0 or 1).

    With a policy (computefence.yaml found here, or --policy) its requirements, hardware and
    custom checks are judged again from the saved facts, with its severities and skips.
    """
    loaded = resolve_policy(policy, no_policy, evaluate.CHECKS)
    report = load_report(path)
    if loaded is not None and (report.policy is None or report.policy.sha256 != loaded.sha256):
        report = run.reevaluate(report, loaded)
    emit(report, fmt.value, output, group_by=group_by.value, quiet=quiet)
    return evaluate.exit_code(report)


ChangesFormat = Enum("ChangesFormat", {name: name for name in CHANGES_FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table


@report_app.command("diff")
def diff_command(
    old: Path = typer.Argument(..., metavar="OLD.json", help="The earlier report."),
    new: Path = typer.Argument(..., metavar="NEW.json", help="The later report."),
    fmt: ChangesFormat | None = typer.Option(
        None, "--format", "-f", help="Output format (default: COMPUTEFENCE_FORMAT where it is one of these, else rich)."
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the changes here (atomically) instead of stdout."
    ),
) -> int:
    """What changed from OLD to NEW; exits 1 when NEW has blockers OLD did not."""
    if fmt is None:
        # A COMPUTEFENCE_FORMAT=junit set for fleet check has no changes form: it is not an error here.
        wanted = os.environ.get("COMPUTEFENCE_FORMAT", "").strip()
        fmt = ChangesFormat(wanted if wanted in CHANGES_FORMATS else "rich")
    earlier, later = load_report(old), load_report(new)
    changes = compare_reports(earlier, later)
    emit_text(lambda **style: render_changes(changes, fmt.value, **style), fmt.value, output, what="the changes")
    return 1 if worsened(changes, later) else 0


@report_app.command("merge")
def merge_command(
    paths: list[Path] = typer.Argument(..., metavar="SHARD.json...", help="Reports of `fleet check --shard I/N`."),
    fmt: OutputFormat = typer.Option("json", "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the merged report here (atomically) instead of stdout."
    ),
) -> int:
    """Join shard reports into one fleet report; exits 1 when the merged run has blockers."""
    merged = merge_reports([(str(path), load_report(path)) for path in paths])
    emit(merged, fmt.value, output)
    return evaluate.exit_code(merged)


@report_app.command("history")
def history_command(
    directory: Path = typer.Argument(..., metavar="DIR", help="A `fleet check --history DIR` directory."),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the page here (atomically) instead of stdout."
    ),
    runs: int = typer.Option(96, "--runs", min=1, help="Draw the newest N runs (96: a day of 15-minute runs)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="With -o: say nothing once it is written (for cron mail)."),
) -> int:
    """One HTML page of a pool's history: each pod in each run, blocked and ready pods over
    time, the newest changes, and the machines and pods that failed most. Exits 0 once it is
    written; 2 when DIR holds no readable run."""
    from computefence.cli.progress import collect_less_often
    from computefence.operations.history import read_runs
    from computefence.render.html import render_history

    with collect_less_often():
        page = render_history(read_runs(directory, runs))
    emit_text(lambda **_: page, "html", output, what="the history page", quiet=quiet)
    return 0
