"""`computefence fleet watch`: the training run on every pod, judged by the run.* checks.

One pass (--once, for cron) or, on a terminal, a live table refreshed every --interval
seconds. Each pass sends the light watch probe (computefence/probe/watch*.py) and judges its
facts with computefence/evaluate/checks/watch_checks.py only.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console, Group
from rich.live import Live

from computefence import evaluate, run
from computefence import watch as watching
from computefence.cli.app import EXIT_INTERRUPTED
from computefence.cli.connection import connection_options, prepare_connections
from computefence.cli.fleet import fleet_app
from computefence.cli.history_options import HistoryOptions, history_options
from computefence.cli.hosts import ledger_from
from computefence.cli.output import FailOn, FailOnOpt, FormatOpt, NotifyFormat, NotifyOn, OutputFormat, emit
from computefence.cli.policy_options import NoPolicyOpt, PolicyOpt
from computefence.cli.progress import collect_less_often, note, progress_lines
from computefence.cli.targets import own_pods_connector, target_options
from computefence.connectors.registry import ConnectSettings
from computefence.errors import ConfigError
from computefence.evaluate.changes import compare_reports
from computefence.evaluate.checks.watch_checks import DEFAULT_STALL_MINUTES
from computefence.interrupt import say_interrupted
from computefence.models import Report
from computefence.operations.notify import Alerts, alert_settings
from computefence.policy import resolve_policy
from computefence.render.webhook import PAYLOADS
from computefence.session import open_session
from computefence.sources import TargetSelection

if TYPE_CHECKING:
    from computefence.operations.history import History  # fcntl: imported where used

_OPS = "Fleet operations"


@fleet_app.command("watch", no_args_is_help=False)
@target_options
@connection_options(
    concurrency_help="Pods watched at once.",
    timeout=30.0,
    timeout_min=5.0,
    timeout_help="Deadline per pod and pass, connecting included.",
)
@history_options("With --once: keep each pass's JSON in DIR and report what changed since the last one.")
def watch(
    ctx: typer.Context,
    selection: TargetSelection = TargetSelection(),
    connection: ConnectSettings = ConnectSettings(),
    history: HistoryOptions = HistoryOptions(),
    once: bool = typer.Option(False, "--once", help="One pass, then exit (for cron)."),
    interval: float = typer.Option(
        60.0, "--interval", min=5.0, metavar="SECONDS", help="Seconds between passes without --once."
    ),
    stall_minutes: float = typer.Option(
        DEFAULT_STALL_MINUTES,
        "--stall-minutes",
        min=1.0,
        metavar="MINUTES",
        help="run.stalled: the job's log and trainer_state.json older than this (by the pod's clock).",
    ),
    fmt: FormatOpt = OutputFormat("rich"),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write each pass's report here (atomically) instead of stdout."
    ),
    fail_on: FailOnOpt = FailOn.block,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the verdict and the pods with findings."),
    allow_unreachable: bool = typer.Option(
        False, "--allow-unreachable", help="A pod that could not be reached does not fail the run."
    ),
    skip: list[str] = typer.Option([], "--skip", metavar="ID", help="Leave out this run.* check (repeatable)."),
    only: list[str] = typer.Option([], "--only", metavar="ID", help="Run only this run.* check (repeatable)."),
    hosts_history: Path | None = typer.Option(
        None,
        "--hosts-history",
        metavar="DIR",
        help="A fleet check --history DIR: run.stalled on a pod whose machine failed a check "
        "there before says to give the pod back.",
    ),
    labels_from: Path | None = typer.Option(
        None,
        "--labels-from",
        metavar="REPORT",
        help="A saved `fleet check --dataset` JSON report: run.loss-plateau's k is each pod's label "
        "count there, where job.num_labels does not say.",
    ),
    policy: PolicyOpt = None,
    no_policy: NoPolicyOpt = False,
    notify: list[str] = typer.Option(
        [],
        "--notify",
        metavar="URL",
        envvar="COMPUTEFENCE_NOTIFY",
        show_envvar=True,
        help="POST a message to this webhook, as fleet check does (the URL is a secret).",
        rich_help_panel=_OPS,
    ),
    notify_on: NotifyOn | None = typer.Option(None, "--notify-on", rich_help_panel=_OPS),
    notify_format: NotifyFormat | None = typer.Option(None, "--notify-format", rich_help_panel=_OPS),
    demo: bool = typer.Option(
        False, "--demo", help="Watch simulated pods on loopback, each running a simulated training job."
    ),
) -> int:
    """Watch the training run on every pod, for the silent failures the run.* checks catch.

    A job that is not there, idle GPUs, a loss stuck at ln(k) or NaN, a stalled log,
    checkpoints on vanishing storage, a disk that fills.

    Exit status: 0 no blockers; 1 blockers (run.loss-nan, run.checkpoint-ephemeral,
    run.disk-eta), where a pod that could not be reached counts unless --allow-unreachable;
    2 usage or inventory error; 130 interrupted.
    """
    # The policy and a typo in --only/--skip fail here, before any pod is contacted.
    loaded = resolve_policy(policy, no_policy, evaluate.CHECKS)
    for flag, patterns in (("--only", only), ("--skip", skip)):
        for pattern in patterns:
            if not (pattern == "run" or pattern.startswith("run.")):
                raise ConfigError(f"{flag} {pattern!r}: fleet watch judges only the run.* checks")
    evaluate.select_findings([], only=only, skip=skip)
    labels = _dataset_labels(labels_from) if labels_from is not None else {}
    machines = ledger_from(hosts_history, flag="--hosts-history").hosts if hosts_history is not None else []
    if history.directory is not None and not once:
        raise ConfigError("--history keeps one entry per cron run: add --once")
    rules = run.Rules(policy=loaded, only=tuple(only), skip=tuple(skip))
    prepare_connections(connection)
    ctx.with_resource(collect_less_often())
    settings = dataclasses.replace(connection, probe="watch")
    alerts = alert_settings(
        notify,
        notify_on and notify_on.value,
        notify_format and notify_format.value,
        loaded.policy.notify if loaded is not None else None,
        # Without --once each pass is compared with the one before, as with a history.
        history=history.directory is not None or not once,
    )
    run_history = history.open(ctx)
    with open_session(
        selection,
        rules,
        settings,
        connector=own_pods_connector("demo", "--demo", selection) if demo else None,
        verb="watch",
        planner=watching.plan,
        progress=progress_lines(quiet or not once),
        sigint=True,
        note=note,
    ) as session:

        def one_pass(previous: Report | None) -> tuple[Report, bool]:
            hosts = session.probe()
            judged = watching.judge(
                session.plan, hosts, stall_minutes=stall_minutes, previous=previous, labels=labels, machines=machines
            )
            report = session.report(judged, kind="watch", fail_on=fail_on.severity, allow_unreachable=allow_unreachable)
            return report, session.interrupted

        if once:
            previous = _previous_watch(run_history) if run_history is not None else None
            report, interrupted = one_pass(previous)
            if interrupted:
                if output is None:
                    emit(report, fmt.value, None, quiet=quiet)
                say_interrupted("computefence: interrupted; nothing written")
                return EXIT_INTERRUPTED
            if previous is not None:
                report = report.model_copy(update={"changes": compare_reports(previous, report)})
            emit(report, fmt.value, output, quiet=quiet)
            if run_history is not None:
                run_history.save(report)
            if alerts is not None:
                alerts.send(report, PAYLOADS)
            return evaluate.exit_code(report)
        return _loop(one_pass, interval, fmt.value, output, quiet, alerts)


def _dataset_labels(path: Path) -> dict[str, int]:
    """Each pod's label count from a saved report's dataset facts (a capped count is no count)."""
    from computefence.saved_files import load_report

    report = load_report(path)
    found = {}
    for host in report.hosts:
        data = host.facts.dataset if host.facts is not None else None
        if data is not None and data.distinct_labels >= 2 and not data.distinct_labels_capped:
            found[host.name] = data.distinct_labels
    if not found:
        raise ConfigError(f"--labels-from {path}: no pod in it has a dataset label count (run fleet check --dataset)")
    return found


def _previous_watch(run_history: History) -> Report | None:
    previous = run_history.latest()
    if previous is not None and previous.kind != "watch":
        raise ConfigError(
            f"--history {run_history.directory} holds {previous.kind} runs: give fleet watch a directory of its own"
        )
    return previous


def _loop(
    one_pass: Callable[[Report | None], tuple[Report, bool]],
    interval: float,
    fmt: str,
    output: Path | None,
    quiet: bool,
    alerts: Alerts | None,
) -> int:
    """Passes every `interval` seconds until Ctrl-C (exit 130): a live table on a terminal,
    else each pass's report in turn (to --output, replaced atomically each time)."""
    console = Console()
    live_table = output is None and fmt == "rich" and console.is_terminal
    previous: Report | None = None
    live = Live(console=console, auto_refresh=False, transient=False) if live_table else None
    try:
        if live is not None:
            live.start()
        while True:
            started = time.monotonic()
            report, interrupted = one_pass(previous)
            if interrupted:
                raise KeyboardInterrupt
            if previous is not None:
                report = report.model_copy(update={"changes": compare_reports(previous, report)})
            if live is not None:
                from computefence.render.terminal import live_renderables

                footer = f"next pass in {interval:g} s · Ctrl-C to stop · --once for the fixes"
                live.update(Group(*live_renderables(report, console.width, footer)), refresh=True)
            else:
                emit(report, fmt, output, quiet=quiet)
            if alerts is not None and previous is not None:
                alerts.send(report, PAYLOADS)
            previous = report
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        if live is not None:
            live.stop()
        say_interrupted("computefence: watch stopped")
        return EXIT_INTERRUPTED
