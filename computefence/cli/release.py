"""`computefence fleet release`: stop (or terminate) the pods a saved fleet report condemns."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

import typer

from computefence import evaluate
from computefence.cli.app import EXIT_INTERRUPTED
from computefence.cli.confirm import action_mode, ask_after_plan, some_names
from computefence.cli.fleet import fleet_app
from computefence.cli.output import emit_text, output_width
from computefence.errors import ConfigError
from computefence.files import check_output_path
from computefence.interrupt import left_untouched, say_interrupted
from computefence.models import Report
from computefence.operations import release
from computefence.operations.action_log import open_log
from computefence.operations.history import ENTRY_RE
from computefence.render.release import RELEASE_FORMATS, render_release
from computefence.saved_files import load_report
from computefence.session import PROVIDER_APIS, open_session, report_targets
from computefence.text import plural

Action = Enum("Action", {name: name for name in release.ACTIONS}, type=str)  # type: ignore[misc]  # members from a registry table
ReleaseFormat = Enum("ReleaseFormat", {name: name for name in RELEASE_FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table


@fleet_app.command("release")
def release_command(
    report_path: Path = typer.Option(
        ..., "--from", metavar="REPORT.json", help="A report of `fleet check --format json -o REPORT.json`."
    ),
    checks: list[str] = typer.Option(
        [],
        "--checks",
        metavar="PATTERN",
        help="Release pods blocked by these checks (id, area or glob; repeatable) instead of by machine faults.",
    ),
    history: Path | None = typer.Option(
        None, "--history", metavar="DIR", help="The --history DIR of fleet check, for --unreachable-runs."
    ),
    unreachable_runs: int | None = typer.Option(
        None,
        "--unreachable-runs",
        min=1,
        metavar="K",
        help="Also release pods that were unreachable or timed out in each of the last K runs in --history.",
    ),
    action: Action | None = typer.Option(
        None, "--action", help="stop (keeps the volume; the default where the provider has it) or terminate (destroys)."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Act without asking (needed without a terminal)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the plan (each pod, its finding, the exact API call, $/h) and call nothing."
    ),
    max_age: str = typer.Option(
        "1h", "--max-age", metavar="AGE", help="Refuse a report older than this (1h, 30m, 90s): pods change."
    ),
    fmt: ReleaseFormat = typer.Option("rich", "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the result here (atomically) instead of stdout."
    ),
    log: Path | None = typer.Option(
        None,
        "--log",
        metavar="FILE",
        help="When acting: append each provider call and its answer here as JSON lines "
        "(default: computefence/actions.jsonl under $XDG_STATE_HOME, else ~/.local/state).",
    ),
) -> int:
    """Give back the pods a saved report condemns, through the provider APIs.

    Stops or terminates them on RunPod, Vast.ai or Lambda Cloud. On a terminal it prints the
    plan (each pod, its finding, the exact API call, $/h), then asks; --yes acts without
    asking, --dry-run prints the plan and calls nothing.

    Selected: provider pods blocked by a check whose remedy is `replace` (the machine is at
    fault), or by the --checks named, and with --history/--unreachable-runs pods that did not
    answer in each of the last K runs. Never touched: a pod whose report shows GPU memory held
    by other processes, a ready pod, a pod without a provider id, and any pod the provider now
    lists with another SSH endpoint. Exit 0 when all went as planned (or nothing was to do), 1
    when a provider call failed or the answer was no, 2 for usage (no terminal to ask on
    included), 130 interrupted.
    """
    mode = action_mode(yes, dry_run)
    max_age_delta = release.parse_duration(max_age, "--max-age")
    if unreachable_runs is not None and history is None:
        raise ConfigError("--unreachable-runs needs --history DIR (the runs to look at)")
    check_output_path(output)  # before any provider is called: a result must be writable after an action
    report = evaluate.with_remedies(load_report(report_path))
    if report.kind != "fleet":
        raise ConfigError(f"{report_path} is a {report.kind} report; fleet release reads a `fleet check` report")
    if any(source.name == "demo" for source in report.sources):
        # Its provider ids are made up: with --yes they would go to the user's real account.
        raise ConfigError(f"{report_path} is a report of the simulated demo fleet: its pods are on no provider")
    age = release.check_age(report, report_path, max_age_delta, datetime.now(timezone.utc))
    release.check_patterns(checks, report)
    unreachable = _unreachable(history, unreachable_runs) if unreachable_runs else None
    with open_session(report_targets(report), connector=PROVIDER_APIS, verb="release", sigint=True) as session:
        sources = session.providers()
        planned = release.plan(
            report, sources, patterns=checks, unreachable=unreachable, action=action.value if action else None
        )
        pods = [p.pod() for p in planned]
        title = f"{report_path.name} of {report.generated_at} ({release.age_text(age)} old)"
        acting = mode == "yes"
        if mode == "ask":
            if not any(p.outcome == "would_release" for p in planned):
                print("computefence: nothing to release: no pod of the report needs a provider call", file=sys.stderr)
            elif _asked(planned, title):
                acting = True
            else:
                return 1
        if acting:
            run = {"command": "fleet release", "report": str(report_path), "report_generated_at": report.generated_at}
            with open_log(log, run) as action_log, session.acting():
                pods = release.act(planned, sources, log=action_log)
    if session.interrupted:
        say_interrupted(release.interrupted_line(action_log) + left_untouched({"--output": output}))
        return EXIT_INTERRUPTED
    result = release.release_report(pods, dry_run=not acting)
    emit_text(
        lambda **style: render_release(result, fmt.value, title=title, **style), fmt.value, output, what="the result"
    )
    return release.exit_code(result)


def _asked(planned: list[release.Planned], title: str) -> bool:
    """The plan in full, then the question (usage error without a terminal)."""
    # A pod the report names twice is one call (the same exact call): counted and named once.
    first_of_call: dict[str | None, release.Planned] = {}
    for item in planned:
        if item.outcome == "would_release":
            first_of_call.setdefault(item.call, item)
    todo = list(first_of_call.values())
    plan = render_release(
        release.release_report([p.pod() for p in planned], dry_run=True), "rich", width=output_width(), title=title
    )
    what = " and ".join(f"{action} {plural(n, 'pod')}" for action, n in Counter(p.action for p in todo).items())
    return ask_after_plan(
        plan,
        f"{what} ({some_names([p.host.name for p in todo])}), as listed above?",
        no_terminal="fleet release without a terminal needs --yes to act or --dry-run to plan (nothing was called)",
        declined="nothing released",
    )


def _unreachable(history: Path | None, k: int) -> dict[tuple[str, str], release.LastAnswer | None]:
    """The pods that did not answer in each of the newest `k` runs of a fleet check --history."""
    assert history is not None
    if not history.is_dir():
        raise ConfigError(f"--history {history}: not a directory")
    found = release.unreachable_pods(_newest_first(history), k)
    if found is None:
        print(
            f"computefence: warning: --history {history} holds fewer than --unreachable-runs {k} readable runs: "
            "no pod is released for not answering",
            file=sys.stderr,
        )
        return {}
    return found


def _newest_first(history: Path) -> Iterator[Report]:
    """The history's readable runs, newest first, read one at a time."""
    for path in sorted((p for p in history.iterdir() if ENTRY_RE.match(p.name)), reverse=True):
        try:
            yield load_report(path)
        except ConfigError as exc:
            print(f"computefence: warning: history: skipping {exc}", file=sys.stderr)
