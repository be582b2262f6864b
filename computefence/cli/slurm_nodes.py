"""`computefence fleet drain` and `fleet resume`: Slurm nodes out of and back into service
from a saved `fleet check --slurm` report: the plan in full, then the question (or --yes, or
--dry-run)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timezone
from enum import Enum
from functools import partial
from pathlib import Path

import typer

from computefence import evaluate
from computefence.cli.app import EXIT_INTERRUPTED
from computefence.cli.confirm import action_mode, ask_after_plan, some_names
from computefence.cli.fleet import fleet_app
from computefence.cli.output import emit_text, output_width
from computefence.connectors.slurm import SlurmOptions
from computefence.errors import ConfigError
from computefence.files import check_output_path
from computefence.interrupt import left_untouched, say_interrupted
from computefence.models import NodeAction, Report
from computefence.operations import release, slurm_nodes
from computefence.operations.action_log import ActionLog, open_log
from computefence.render.json import load_report
from computefence.render.node_actions import NODE_ACTION_FORMATS, render_node_actions
from computefence.text import plural

NodeFormat = Enum("NodeFormat", {name: name for name in NODE_ACTION_FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table

_FROM = typer.Option(
    ..., "--from", metavar="REPORT.json", help="A report of `fleet check --slurm -f json -o REPORT.json`."
)
_YES = typer.Option(False, "--yes", "-y", help="Act without asking (needed without a terminal).")
_DRY_RUN = typer.Option(False, "--dry-run", help="Print the plan and its exact commands, and run nothing.")
_MAX_AGE = typer.Option("1h", "--max-age", metavar="AGE", help="Refuse a report older than this (1h, 30m, 90s).")
_FORMAT = typer.Option("rich", "--format", "-f", help="Output format.")
_OUTPUT = typer.Option(
    None, "--output", "-o", metavar="FILE", help="Write the result here (atomically) instead of stdout."
)
_LOG = typer.Option(
    None,
    "--log",
    metavar="FILE",
    help="When acting: append each scontrol call and its answer here as JSON lines "
    "(default: computefence/actions.jsonl under $XDG_STATE_HOME, else ~/.local/state).",
)


def _load(report_path: Path, max_age: str) -> tuple[Report, str]:
    max_age_delta = release.parse_duration(max_age, "--max-age")
    report = evaluate.with_remedies(load_report(report_path))
    if report.kind != "fleet":
        raise ConfigError(f"{report_path} is a {report.kind} report; it needs a `fleet check --slurm` report")
    age = release.check_age(report, report_path, max_age_delta, datetime.now(timezone.utc))
    if not slurm_nodes.slurm_hosts(report):
        raise ConfigError(f"{report_path} holds no Slurm node: it needs a `fleet check --slurm` report")
    return report, f"{report_path.name} of {report.generated_at} ({release.age_text(age)} old)"


@fleet_app.command("drain")
def drain_command(
    report_path: Path = _FROM,
    yes: bool = _YES,
    dry_run: bool = _DRY_RUN,
    max_age: str = _MAX_AGE,
    fmt: NodeFormat = _FORMAT,
    output: Path | None = _OUTPUT,
    log: Path | None = _LOG,
) -> int:
    """Drain the Slurm nodes a saved report finds at fault, after showing the plan and asking.

    Selected: nodes blocked by a machine fault (a check whose remedy is `replace`, or a
    wedged driver), never by the job's own configuration. Each is drained with
    Reason="computefence: <check ids>". A node already drained or down is left as it is,
    its reason kept. --yes drains without asking; --dry-run prints the plan only. Exit 0 when
    all went as planned (or nothing was to do), 1 when a call failed or the answer was no, 2
    for usage (no terminal to ask on included), 130 interrupted.
    """
    check_output_path(output)
    report, title = _load(report_path, max_age)
    scontrol = slurm_nodes.Scontrol()
    planned = slurm_nodes.plan_drain(report, scontrol)
    act = partial(slurm_nodes.act_drain, planned, scontrol)
    return _carry_out(
        "drain", report_path, report, title, planned, act, action_mode(yes, dry_run), fmt=fmt, output=output, log=log
    )


@fleet_app.command("resume")
def resume_command(
    report_path: Path = _FROM,
    yes: bool = _YES,
    dry_run: bool = _DRY_RUN,
    max_age: str = _MAX_AGE,
    timeout: float = typer.Option(60.0, "--timeout", min=5, metavar="SECONDS", help="Deadline of each node's probe."),
    fmt: NodeFormat = _FORMAT,
    output: Path | None = _OUTPUT,
    log: Path | None = _LOG,
) -> int:
    """Prove and resume the nodes ComputeFence drained, after showing the plan and asking.

    Only a node drained with a reason starting `computefence:` is considered. Each is held in a
    maintenance reservation of its own, its drain lifted, probed inside the reservation
    (machine checks only), and the reservation deleted if it passes; else it is drained
    again with its reason. --yes acts without asking; --dry-run prints the plan only. Exit 0
    when every node was resumed (or nothing was to do), 1 when one failed its check, a call
    failed or the answer was no, 2 for usage (no terminal to ask on included), 130
    interrupted.
    """
    check_output_path(output)
    report, title = _load(report_path, max_age)
    scontrol = slurm_nodes.Scontrol()
    planned = slurm_nodes.plan_resume(report, scontrol)
    prove = slurm_nodes.slurm_prover(SlurmOptions(deadline=timeout, immediate=min(10, int(timeout) // 2)))
    act = partial(slurm_nodes.act_resume, planned, scontrol, prove=prove)
    return _carry_out(
        "resume", report_path, report, title, planned, act, action_mode(yes, dry_run), fmt=fmt, output=output, log=log
    )


_VERB_DONE = {"drain": "drain", "resume": "prove and resume"}


def _carry_out(
    verb: str,
    report_path: Path,
    report: Report,
    title: str,
    planned: list[NodeAction],
    act: Callable[[ActionLog], list[NodeAction]],
    mode: str,
    *,
    fmt: NodeFormat,
    output: Path | None,
    log: Path | None,
) -> int:
    """The plan (mode "dry-run", or nothing to do), or what `act` did with each call logged,
    after the plan and the question (mode "ask") or straight away (mode "yes"); then the
    result in its format and its exit code. A Ctrl-C says which calls were sent."""
    todo = [n.name for n in planned if n.outcome == "planned"]
    acting = mode == "yes"
    if mode == "ask":
        if not todo:
            print(f"computefence: nothing to {verb}: no node of the report needs a call", file=sys.stderr)
        elif ask_after_plan(
            render_node_actions(
                slurm_nodes.node_report(verb, planned, dry_run=True), "rich", width=output_width(), title=title
            ),
            f"{_VERB_DONE[verb]} {plural(len(todo), 'node')} ({some_names(todo)}), as listed above?",
            no_terminal=f"fleet {verb} without a terminal needs --yes to act or --dry-run to plan (nothing was run)",
            declined=f"nothing {'drained' if verb == 'drain' else 'resumed'}",
        ):
            acting = True
        else:
            return 1
    nodes = planned
    if acting:
        run = {"command": f"fleet {verb}", "report": str(report_path), "report_generated_at": report.generated_at}
        with open_log(log, run) as action_log:
            try:
                nodes = act(action_log)
            except KeyboardInterrupt:
                say_interrupted(slurm_nodes.interrupted_line(action_log) + left_untouched({"--output": output}))
                return EXIT_INTERRUPTED
    result = slurm_nodes.node_report(verb, nodes, dry_run=not acting)
    emit_text(
        lambda **s: render_node_actions(result, fmt.value, title=title, **s), fmt.value, output, what="the result"
    )
    return slurm_nodes.exit_code(result)
