"""--history DIR, --keep and --history-wait, shared by the commands that keep a run history
(`fleet check`, `fleet fix`, `fleet watch --once`).

A command takes one `history: HistoryOptions` parameter and is decorated with
`history_options(help=...)`, which declares the three options in its place; `open(ctx)` locks
the folder for the command's lifetime (None without --history)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from computefence.cli.option_groups import option_group

if TYPE_CHECKING:
    from computefence.operations.history import History  # fcntl: POSIX only, imported where used

_PANEL = "Fleet operations"


@dataclass(frozen=True)
class HistoryOptions:
    directory: Path | None = None
    keep: int = 200
    wait: float = 60.0

    def open(self, ctx: typer.Context) -> History | None:
        if self.directory is None:
            return None
        from computefence.operations.history import open_history

        return ctx.with_resource(open_history(self.directory, keep=self.keep, wait=self.wait))


def history_options(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`help`: what --history keeps, in this command's words."""
    options = [
        (
            "history",
            Annotated[
                Path | None,
                typer.Option("--history", metavar="DIR", help=help, rich_help_panel=_PANEL),
            ],
            None,
        ),
        (
            "keep",
            Annotated[
                int,
                typer.Option("--keep", min=1, metavar="N", help="Runs kept in --history.", rich_help_panel=_PANEL),
            ],
            200,
        ),
        (
            "history_wait",
            Annotated[
                float,
                typer.Option(
                    "--history-wait",
                    min=0.0,
                    metavar="SECONDS",
                    help="How long to wait for another run holding --history, then give up.",
                    rich_help_panel=_PANEL,
                ),
            ],
            60.0,
        ),
    ]
    return option_group(
        "history",
        options,
        lambda values: HistoryOptions(values["history"], values["keep"], values["history_wait"]),
    )
