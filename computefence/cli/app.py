"""The typer application every command module registers on."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from computefence.version import __version__

# Exit codes shared by every command (see cli/__init__.py).
EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130

app = typer.Typer(
    name="computefence",
    help="Pre-flight checks for rented GPU compute: storage that vanishes, CPU fallbacks, broken drivers, bad datasets.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"computefence {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """ComputeFence: catch the misconfigurations that waste GPU hours, before the job starts."""


def group_defaulting_to(default: str) -> type[TyperGroup]:
    """A command group in which `GROUP ARGS...` means `GROUP DEFAULT ARGS...` when ARGS does not
    start with one of its subcommands (`report FILE.json` is `report show FILE.json`)."""

    class DefaultingGroup(TyperGroup):
        def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]  # typer.Context is click's
            if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
                args = [default, *args]
            return super().parse_args(ctx, args)

    return DefaultingGroup
