"""`computefence hosts --history DIR`: the machines behind the pods of a fleet check history;
`hosts avoid` prints the ones to leave out of the next rental."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import typer

from computefence.cli.app import command_group
from computefence.cli.output import emit_text, write_stdout
from computefence.cli.progress import collect_less_often
from computefence.errors import ConfigError
from computefence.evaluate.ledger import avoid_list, build_ledger
from computefence.models import HostLedger, RunDigestFile
from computefence.operations.history import no_runs, read_digests
from computefence.render.hosts import AVOID_FORMATS, HOSTS_FORMATS, render_avoid, render_hosts, vast_ids
from computefence.text import plural

hosts_app = command_group(
    "hosts",
    "The machines behind your pods, from a fleet check --history: which failed you, and which to avoid.",
    default="list",
)

HostsFormat = Enum("HostsFormat", {name: name for name in HOSTS_FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table
AvoidFormat = Enum("AvoidFormat", {name: name for name in AVOID_FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table
HistoryOpt = typer.Option(..., "--history", metavar="DIR", help="The --history DIR of fleet check.")
MinRunsOpt = typer.Option(
    1,
    "--min-runs",
    min=1,
    metavar="N",
    help="Avoid a machine only when a machine fault (a replace check) blocked it in at least N runs.",
)


@hosts_app.command("list")
def hosts_command(
    history: Path = HistoryOpt,
    min_runs: int = MinRunsOpt,
    fmt: HostsFormat = typer.Option("rich", "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write it here (atomically) instead of stdout."
    ),
) -> int:
    """Every machine seen in the history, with the runs it blocked and by which checks.

    Its provider and id, GPU model, runs seen and blocked, last Xid, perf against the fleet
    median, last seen."""
    ledger = ledger_from(history, min_runs)
    title = f"{history}"
    emit_text(
        lambda **style: render_hosts(ledger, fmt.value, title=title, **style), fmt.value, output, what="the hosts"
    )
    return 0


@hosts_app.command("avoid")
def avoid_command(
    history: Path = HistoryOpt,
    min_runs: int = MinRunsOpt,
    fmt: AvoidFormat = typer.Option(
        "vast", "--format", "-f", help="vast: a `vastai search offers` query clause; json: the list, any provider."
    ),
) -> int:
    """The machines a machine fault blocked in at least --min-runs runs.

    `vastai search offers "gpu_name=RTX_4090 $(computefence hosts avoid --history DIR)"` leaves
    out the Vast machines (nothing is printed when there are none); `--format json` lists them
    for every provider, for scripts and for RunPod users (who cannot filter by machine)."""
    machines = avoid_list(ledger_from(history, min_runs))
    if fmt.value == "vast":
        _, odd = vast_ids(machines)
        for machine_id in odd:
            print(f"computefence: warning: Vast machine id {machine_id!r} is not a number: left out", file=sys.stderr)
        others = sorted({m.provider for m in machines if m.provider != "vast"})
        if others:
            count = sum(1 for m in machines if m.provider != "vast")
            print(
                f"computefence: note: {plural(count, 'machine')} of {', '.join(others)} to avoid, "
                "not in a vastai query: --format json lists them",
                file=sys.stderr,
            )
    write_stdout(render_avoid(machines, fmt.value))
    return 0


def ledger_from(history: Path, min_runs: int = 1, flag: str = "--history") -> HostLedger:
    """The machines of a fleet check --history DIR (given as `flag`); a one-line ConfigError
    when it is not one."""
    with collect_less_often():
        return build_ledger(_runs(history, flag), min_runs)


def _runs(history: Path, flag: str) -> Iterator[RunDigestFile]:
    """The digests of the history's readable runs, oldest first, one at a time."""
    if not history.is_dir():
        raise ConfigError(f"{flag} {history}: not a directory")

    def digests() -> Iterator[RunDigestFile]:
        found = False
        for _, digest in read_digests(history):
            found = True
            yield digest
        if not found:
            raise no_runs(history)  # as report history: exit 2

    return digests()
