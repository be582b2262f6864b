"""`computefence fleet check`: the probe on every pod over SSH, in parallel, one fleet report."""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path
from typing import cast

import typer

from computefence import evaluate, run
from computefence.cli.app import EXIT_INTERRUPTED, command_group
from computefence.cli.connection import connection_options, prepare_connections
from computefence.cli.history_options import HistoryOptions, history_options
from computefence.cli.output import (
    FailOn,
    FailOnOpt,
    FormatOpt,
    GroupBy,
    GroupByOpt,
    NotifyFormat,
    NotifyOn,
    OutputFormat,
    QuietOpt,
    ReportFileOpt,
    emit,
)
from computefence.cli.policy_options import BaselineOpt, NoPolicyOpt, PolicyOpt
from computefence.cli.progress import collect_less_often, note, progress_lines
from computefence.cli.targets import own_pods_connector, target_options
from computefence.connectors.registry import ConnectSettings, ReplaySettings, SlurmSettings
from computefence.errors import ConfigError
from computefence.files import check_output_path, write_output
from computefence.interrupt import left_untouched, say_interrupted
from computefence.operations.gate import HEALTHY_FORMATS, check_gate_path, healthy_file
from computefence.operations.notify import alert_settings
from computefence.policy import resolve_policy
from computefence.probe.core import DEFAULT_TIMEOUTS
from computefence.render.webhook import PAYLOADS
from computefence.session import check_plan, open_session
from computefence.sources import TargetSelection
from computefence.sources.selection import parse_shard

fleet_app = command_group("fleet", "Check many pods over SSH at once.")

_OPS = "Fleet operations"
HealthyFormat = Enum("HealthyFormat", {name: name for name in HEALTHY_FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table


@fleet_app.command("check", no_args_is_help=False)
@target_options
@connection_options()
@history_options("Keep each run's JSON in DIR and lead the report with what changed since the last run there.")
def check(
    ctx: typer.Context,
    selection: TargetSelection = TargetSelection(),
    connection: ConnectSettings = ConnectSettings(),
    history: HistoryOptions = HistoryOptions(),
    demo: bool = typer.Option(False, "--demo", help="Start a small simulated fleet on loopback and check it."),
    replay: Path | None = typer.Option(
        None,
        "--replay",
        metavar="DIR",
        hidden=True,
        help="Serve the pods and probe outputs recorded in DIR instead of contacting any pod (tests, demos).",
    ),
    fmt: FormatOpt = OutputFormat("rich"),
    output: ReportFileOpt = None,
    fail_on: FailOnOpt = FailOn.block,
    group_by: GroupByOpt = GroupBy("check"),
    quiet: QuietOpt = False,
    allow_unreachable: bool = typer.Option(
        False, "--allow-unreachable", help="A pod that could not be checked does not fail the run."
    ),
    skip: list[str] = typer.Option([], "--skip", metavar="ID", help="Leave out this check (repeatable)."),
    only: list[str] = typer.Option([], "--only", metavar="ID", help="Run only this check (repeatable)."),
    perf: bool = typer.Option(
        False,
        "--perf",
        help="Also measure every pod's GPUs: matmul TFLOPS, PCIe copies, NCCL "
        "all-reduce (up to 20 s of load per pod; skipped on pods whose "
        "GPUs other processes use).",
    ),
    policy: PolicyOpt = None,
    no_policy: NoPolicyOpt = False,
    baseline: BaselineOpt = None,
    account: str | None = typer.Option(
        None,
        "--account",
        "-A",
        metavar="NAME",
        help="With --slurm: srun's --account (else SLURM_ACCOUNT).",
        rich_help_panel="Slurm",
    ),
    qos: str | None = typer.Option(
        None, "--qos", metavar="NAME", help="With --slurm: srun's --qos (else SLURM_QOS).", rich_help_panel="Slurm"
    ),
    immediate: int = typer.Option(
        10,
        "--immediate",
        min=1,
        metavar="SECONDS",
        help="With --slurm: a node without free resources within this is reported busy.",
        rich_help_panel="Slurm",
    ),
    # ---- fleet operations: launch gate, history, alerts, shards
    healthy_out: Path | None = typer.Option(
        None,
        "--healthy-out",
        metavar="FILE",
        help="Write the pods a job can start on here (atomically, also "
        "when the run exits 1; empty when none is ready).",
        rich_help_panel=_OPS,
    ),
    healthy_format: HealthyFormat = typer.Option(
        "names",
        "--healthy-format",
        help="names (one a line), names0 (NUL-ended, for xargs -0), ssh (user@host -p port), "
        "inventory (YAML of just those pods) or json.",
        rich_help_panel=_OPS,
    ),
    shard: str | None = typer.Option(
        None,
        "--shard",
        metavar="I/N",
        parser=parse_shard,
        help="Check only the I-th of N slices of the targets (by a stable hash "
        "of each name); join the reports with `computefence report merge`.",
        rich_help_panel=_OPS,
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        metavar="N",
        help="Probe the pods in N processes, split as --shard splits them, into the one "
        "report a single process gives (default: the usable cores, at most one a pod).",
        rich_help_panel=_OPS,
    ),
    notify: list[str] = typer.Option(
        [],
        "--notify",
        metavar="URL",
        envvar="COMPUTEFENCE_NOTIFY",
        show_envvar=True,
        help="POST a message to this webhook (Slack, Mattermost or any; repeatable). "
        "The URL is a secret: never printed; prefer the env var to argv.",
        rich_help_panel=_OPS,
    ),
    notify_on: NotifyOn | None = typer.Option(
        None,
        "--notify-on",
        help="change (new or cleared blockers, pods lost or back; needs "
        "--history, the default with it), block (the run fails; "
        "the default without) or always.",
        rich_help_panel=_OPS,
    ),
    notify_format: NotifyFormat | None = typer.Option(
        None,
        "--notify-format",
        help="slack (text + blocks; the default) or json (summary and changes).",
        rich_help_panel=_OPS,
    ),
) -> int:
    """Check every pod over SSH in parallel and print one fleet report.

    Exit status: 0 no blockers; 1 blockers, where a pod that could not be checked counts
    unless --allow-unreachable; 2 usage or inventory error; 130 interrupted.
    """
    # The policy, the baseline and a typo in --only/--skip fail here, before any pod is contacted.
    loaded = resolve_policy(policy, no_policy, evaluate.CHECKS)
    rules = run.rules(policy=loaded, baseline=baseline, only=only, skip=skip)
    prepare_connections(connection)
    ctx.with_resource(collect_less_often())
    # The canary runs after the machine checks, on its own budget.
    settings = dataclasses.replace(
        connection, deadline=connection.deadline + (DEFAULT_TIMEOUTS["perf"] if perf else 0.0)
    ).with_own(SlurmSettings(account=account, qos=qos, partitions=selection.slurm_partitions, immediate=immediate))
    if replay is not None:
        settings = settings.with_own(ReplaySettings(recording=replay))
    if (account or qos) and not selection.slurm:
        raise ConfigError("--account and --qos need --slurm")
    check_output_path(output)
    if healthy_out is not None:
        check_gate_path(healthy_out)
    alerts = alert_settings(
        notify,
        notify_on and notify_on.value,
        notify_format and notify_format.value,
        loaded.policy.notify if loaded is not None else None,
        history=history.directory is not None,
    )
    run_history = history.open(ctx)
    with open_session(
        selection,
        rules,
        settings,
        connector=_own_pods(demo, replay, selection),
        planner=check_plan(perf),
        shard=cast("tuple[int, int] | None", shard),  # parse_shard's value; typer is told str
        workers=workers,
        progress=progress_lines(quiet),
        sigint=True,
        note=note,
    ) as session:
        hosts = session.probe()
        interrupted = session.interrupted
        report = session.report(
            session.judge(hosts), kind="fleet", fail_on=fail_on.severity, allow_unreachable=allow_unreachable
        )
        plan = session.plan
    if run_history is not None and not interrupted:
        report = run_history.with_changes(report)
    if interrupted:
        # A half-finished run replaces no file: a good prev.json, gate file or history stays.
        # The partial report still goes to the terminal when no --output was asked for.
        if output is None:
            emit(report, fmt.value, None, group_by=group_by.value, quiet=quiet)
    else:
        emit(report, fmt.value, output, group_by=group_by.value, quiet=quiet)
        if healthy_out is not None:
            write_output(healthy_file(report, plan.targets, healthy_format.value), healthy_out, flag="--healthy-out")
        if run_history is not None:
            run_history.save(report)
        if alerts is not None:
            alerts.send(report, PAYLOADS)
    if interrupted:
        # The report's count of pods not checked (unreachable ones too), so the two agree.
        not_checked, cancelled = report.summary.not_ok, session.cancelled(hosts)
        stopped = f" ({cancelled} stopped by the interrupt)" if cancelled != not_checked else ""
        untouched = left_untouched({"--output": output, "--healthy-out": healthy_out, "--history": history.directory})
        say_interrupted(
            f"computefence: interrupted; {not_checked} of {len(hosts)} pods were not checked{stopped}{untouched}"
        )
        return EXIT_INTERRUPTED
    return evaluate.exit_code(report)


def _own_pods(demo: bool, replay: Path | None, selection: TargetSelection) -> str | None:
    """The connector that brings its own pods (--demo, --replay); None: the targets' own."""
    if demo:
        return own_pods_connector("demo", "--demo", selection, ["--replay"] if replay is not None else [])
    if replay is not None:
        return own_pods_connector("replay", "--replay", selection)
    return None
