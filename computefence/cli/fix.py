"""`computefence fleet fix`: check the pods, plan each one's safe fix steps, and with --apply run
them over one SSH session per pod, then re-probe the pods that changed and say, per finding,
fixed / still_failing / failed / skipped. Without --apply it is a plan and changes nothing.

Exit status: 0 every selected finding fixed, or nothing to do; 1 otherwise (a plan with
anything left to do included); 2 usage or configuration error; 130 interrupted.
"""

from __future__ import annotations

import asyncio
import sys
from enum import Enum
from pathlib import Path

import typer

from computefence import evaluate, run
from computefence.cli.app import EXIT_INTERRUPTED
from computefence.cli.confirm import ask_after_plan, some_names
from computefence.cli.connection import connection_options, prepare_connections
from computefence.cli.fleet import fleet_app
from computefence.cli.history_options import HistoryOptions, history_options
from computefence.cli.output import output_width, write_stdout
from computefence.cli.policy_options import BaselineOpt, NoPolicyOpt, PolicyOpt
from computefence.cli.progress import LiveCount, note, progress_lines
from computefence.cli.targets import own_pods_connector, target_options
from computefence.connectors.registry import ConnectSettings
from computefence.errors import ConfigError
from computefence.files import check_output_dir, check_output_path, write_output
from computefence.interrupt import left_untouched, say_interrupted
from computefence.models import FixReport, HostReport, StepRecord, acts
from computefence.operations import fix as fixes
from computefence.operations import fix_run
from computefence.policy import resolve_policy
from computefence.render.fix import FORMATS, render_fix
from computefence.session import RunSession, open_session
from computefence.sources import TargetSelection
from computefence.text import clean, plural

FixFormat = Enum("FixFormat", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table
_APPLY = "Applying"


@fleet_app.command("fix", no_args_is_help=False)
@target_options
@connection_options(
    concurrency=32,
    concurrency_help="Pods worked on at once.",
    timeout_help="Deadline per pod for each probe (before and after).",
    envvars=False,
)
@history_options("Keep the fleet's state after the run in DIR, as fleet check --history does.")
def fix(
    ctx: typer.Context,
    selection: TargetSelection = TargetSelection(),
    connection: ConnectSettings = ConnectSettings(),
    history: HistoryOptions = HistoryOptions(),
    apply: bool = typer.Option(
        False,
        "--apply",
        help="Run the safe steps (without it: print the plan, change nothing).",
        rich_help_panel=_APPLY,
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Do not ask before applying (needed without a terminal).", rich_help_panel=_APPLY
    ),
    allow_disruptive: bool = typer.Option(
        False,
        "--allow-disruptive",
        help="Also run steps that restart a service or the GPU (a running job would die).",
        rich_help_panel=_APPLY,
    ),
    step_timeout: float = typer.Option(
        300.0,
        "--step-timeout",
        min=1.0,
        metavar="SECONDS",
        help="Stop a step still running after this long.",
        rich_help_panel=_APPLY,
    ),
    log: Path | None = typer.Option(
        None,
        "--log",
        metavar="DIR",
        help="Keep one transcript per pod here: each command, its exit, duration and output (64 KiB).",
        rich_help_panel=_APPLY,
    ),
    skip: list[str] = typer.Option([], "--skip", metavar="ID", help="Leave out this check (repeatable)."),
    only: list[str] = typer.Option([], "--only", metavar="ID", help="Fix only this check (repeatable)."),
    fmt: FixFormat = typer.Option("rich", "--format", "-f", help="Output format: rich (text) or json."),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the report here (atomically) instead of stdout."
    ),
    policy: PolicyOpt = None,
    no_policy: NoPolicyOpt = False,
    baseline: BaselineOpt = None,
    demo: bool = typer.Option(
        False,
        "--demo",
        help="Fix the simulated demo fleet: its steps change files in the demo's own temporary folder only.",
    ),
) -> int:
    """Apply the safe fixes on every pod at once, and prove each one with a re-probe.

    Without --apply: the plan (each pod's steps in order, then what will not run and why).
    Exit status: 0 every finding fixed or nothing to do; 1 otherwise; 2 usage; 130 interrupted.
    """
    loaded = resolve_policy(policy, no_policy, evaluate.CHECKS)
    rules = run.rules(policy=loaded, baseline=baseline, only=only, skip=skip)
    if not apply and (yes or allow_disruptive):
        raise ConfigError(f"{'--yes' if yes else '--allow-disruptive'} needs --apply (without it fleet fix only plans)")
    check_output_path(output)
    check_output_dir(log, "--log")
    prepare_connections(connection)
    run_history = history.open(ctx)
    with open_session(
        selection,
        rules,
        connection,
        connector=own_pods_connector("demo", "--demo", selection) if demo else None,
        progress=progress_lines(),
        sigint=True,
        note=note,
    ) as session:
        probed = session.probe()
        before = session.judge(probed)
        report = fix_run.plan_fixes(before, allow_disruptive, session.plan.targets)
        after = before
        if not session.interrupted and apply and not report.step_count:
            # Nothing to run: the plan says why, and there is no question to ask.
            print("computefence: nothing to apply: no finding has a step fleet fix runs", file=sys.stderr)
            apply = False
        if not session.interrupted and apply:
            pods = [p.name for p in report.hosts if acts(p) and any(s.status == "planned" for s in p.steps)]
            if not yes and not _ask_after_plan(report, f"on {plural(len(pods), 'pod')} ({some_names(pods)})"):
                return 1
            with _StepProgress(report.step_count) as progress:
                done = asyncio.run(
                    fix_run.apply_and_prove(
                        session,
                        probed,
                        before,
                        report,
                        fixes.ApplyOptions(step_timeout, connection.concurrency),
                        progress.update,
                    )
                )
            report, after = done.report, done.after
            if log is not None:
                fixes.write_transcripts(log, done.transcripts)
    if session.interrupted:
        if output is None:
            write_stdout(render_fix(report, fmt.value, output_width()))
        ran = sum(1 for h in report.hosts for s in h.steps if s.status in ("ran", "failed", "timeout"))
        say_interrupted(
            f"computefence: interrupted; {plural(ran, 'step')} ran before it"
            + left_untouched({"--output": output, "--history": history.directory})
        )
        return EXIT_INTERRUPTED
    text = render_fix(report, fmt.value, output_width())
    if output is not None:
        write_output(text, output)
        print(f"computefence: wrote the {fmt.value} fix report to {output}", file=sys.stderr)
    else:
        write_stdout(text)
    if run_history is not None:
        run_history.save(session.report(after, kind="fleet"))
    return report.exit_code()


class _StepProgress(LiveCount):
    """Steps done/total: a live line on a terminal, `[i/n]` lines otherwise."""

    def __init__(self, total: int):
        super().__init__(total, "applying", "steps")

    def update(self, pod: str, record: StepRecord) -> None:
        took = f" ({record.duration_s:.1f} s)" if record.duration_s is not None else ""
        self.advance(
            record.status == "ran", f"{pod}: {record.check}: {record.status}{took}", last=f" · {pod}: {record.check}"
        )


def _ask_after_plan(plan: FixReport, where: str) -> bool:
    return ask_after_plan(
        render_fix(plan, "rich", output_width(), asking=True),
        f"apply {plural(plan.step_count, 'step')} {where}, as listed above?",
        no_terminal="applying without a terminal needs --yes (nothing was changed)",
        declined="nothing applied",
    )


def fix_this_machine(
    session: RunSession,
    probed: HostReport,
    host: HostReport,
    *,
    fmt: str,
    output: Path | None,
    yes: bool,
    allow_disruptive: bool,
    step_timeout: float,
) -> int:
    """`doctor --fix`: the safe steps of this machine's findings, after the same prompt as
    fleet fix (or --yes), then a re-probe and each finding's outcome."""
    if fmt not in FORMATS:
        raise ConfigError(f"doctor --fix writes {' or '.join(FORMATS)}, not {fmt}")
    check_output_path(output)
    planned = fix_run.plan_fixes([host], allow_disruptive)
    steps = planned.step_count
    if not steps:
        print("computefence: nothing to apply: no finding has a step doctor --fix runs", file=sys.stderr)
        _write(render_fix(planned, fmt, output_width()), output)
        return planned.exit_code()
    if not yes and not _ask_after_plan(planned, f"on this machine ({clean(host.name)})"):
        return 1
    with _StepProgress(steps) as progress:
        done = asyncio.run(
            fix_run.apply_and_prove(
                session, [probed], [host], planned, fixes.ApplyOptions(step_timeout, 1), progress.update
            )
        )
    text = render_fix(done.report, fmt, output_width())
    if session.interrupted:
        if output is None:
            write_stdout(text)
        say_interrupted("computefence: interrupted" + left_untouched({"--output": output}))
        return EXIT_INTERRUPTED
    _write(text, output)
    return done.report.exit_code()


def _write(text: str, output: Path | None) -> None:
    if output is not None:
        write_output(text, output)
    else:
        write_stdout(text)
