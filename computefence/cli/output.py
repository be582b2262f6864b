"""Options and output shared by the commands that print a report (doctor, report, fleet)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from computefence.files import write_output
from computefence.models import Report, Severity
from computefence.operations.notify import NOTIFY_ON
from computefence.render import FORMATS, render_pieces
from computefence.render.interface import GROUP_BY
from computefence.render.webhook import PAYLOADS
from computefence.text import is_terminal

if TYPE_CHECKING:
    from rich.console import Console

# Typer shows an Enum's values as the choices in --help and rejects anything else (exit 2).
OutputFormat = Enum("OutputFormat", {name: name for name in FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table


NotifyOn = Enum("NotifyOn", {name: name for name in NOTIFY_ON}, type=str)  # type: ignore[misc]  # members from a registry table
NotifyFormat = Enum("NotifyFormat", {name: name for name in PAYLOADS}, type=str)  # type: ignore[misc]  # members from a registry table
GroupBy = Enum("GroupBy", {name: name for name in GROUP_BY}, type=str)  # type: ignore[misc]  # members from a registry table


class FailOn(str, Enum):
    warn = "warn"
    block = "block"

    @property
    def severity(self) -> Severity:
        return Severity(self.value)


# The report options of the commands that print a report (fleet check and watch, doctor, dataset, report).
FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", envvar="COMPUTEFENCE_FORMAT", help="Output format.")]
ReportFileOpt = Annotated[
    Path | None,
    typer.Option("--output", "-o", metavar="FILE", help="Write the report here (atomically) instead of stdout."),
]
FailOnOpt = Annotated[
    FailOn,
    typer.Option("--fail-on", envvar="COMPUTEFENCE_FAIL_ON", help="Exit 1 on blockers only, or on warnings too."),
]
# The view options of the commands that show a fleet report (fleet check, report show; doctor --quiet).
GroupByOpt = Annotated[
    GroupBy,
    typer.Option(
        "--group-by",
        help="check: each finding once with the pods it hits; pod: each pod with its fixes in order (rich, markdown).",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Only the verdict and what is not ready (for cron mail; rich output).")
]


def emit(report: Report, fmt: str, output: Path | None, *, group_by: str = "check", quiet: bool = False) -> None:
    """Render `report` and write it to `output` (atomically) or to stdout."""
    emit_text(
        lambda **style: render_pieces(report, fmt, group_by=group_by, quiet=quiet, **style),
        fmt,
        output,
        what=f"the {fmt} report",
        quiet=quiet,
    )


def emit_text(
    render_text: Callable[..., str | Iterable[str]], fmt: str, output: Path | None, *, what: str, quiet: bool = False
) -> None:
    """`render_text(color=, width=)` to `output` (atomically, plain) or to stdout (colored on a
    terminal). With `quiet` (cron: mail only when there is output), no line says where it went."""
    if output is not None:
        write_output(render_text(), output)
        if not quiet:
            print(f"computefence: wrote {what} to {output}", file=sys.stderr)
        return
    console = _rich_console() if FORMATS[fmt].colors and is_terminal(sys.stdout) else None
    color = console is not None and not console.no_color
    write_stdout(render_text(color=color, width=output_width()))


def output_width() -> int:
    """The terminal's width; into a pipe or file, COLUMNS where the user set it (as rich does), else 100."""
    wide = is_terminal(sys.stdout) or os.environ.get("COLUMNS", "").strip().isdigit()
    return _rich_console().width if wide else 100


def _rich_console() -> Console:
    from rich.console import Console

    return Console()


def write_stdout(text: str | Iterable[str]) -> None:
    try:
        for piece in [text] if isinstance(text, str) else text:
            try:
                sys.stdout.write(piece)
            except UnicodeEncodeError:  # a terminal without UTF-8: show what it can
                encoding = sys.stdout.encoding or "ascii"
                sys.stdout.write(piece.encode(encoding, "replace").decode(encoding))
        sys.stdout.flush()
    except BrokenPipeError:
        # `computefence doctor --format json | head`: the reader left; that is not an error.
        # Point stdout at /dev/null so the interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
