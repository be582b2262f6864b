"""The typer application every command module registers on."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import typer
from typer.core import TyperGroup

from computefence.cli.help_layout import flags_without_type, tidy_help
from computefence.interrupt import held
from computefence.version import __version__

# Exit codes shared by every command (see cli/__init__.py).
EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130

# Each top-level command and the modules (in computefence.cli) that register it, in the order
# help lists them. A command's modules are imported when it is used, so `--version` and
# `doctor` do not pay for the fleet's imports.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "doctor": ("doctor",),
    "schema": ("schema",),
    "probe": ("script",),
    "dataset": ("dataset",),
    "fleet": ("fleet",),
    "hosts": ("hosts",),
    "inventory": ("inventory",),
    "policy": ("policy",),
    "report": ("report",),
}


# A group's subcommands that other modules register, by the module (in computefence.cli) that
# registers each: imported when that subcommand is used or the group's commands are listed, so
# `fleet check` does not pay for fix, release, drain, snapshot and watch (~40 ms of a start).
SUBCOMMAND_MODULES: dict[str, dict[str, str]] = {
    "fleet": {
        "fix": "fix",
        "release": "release",
        "drain": "slurm_nodes",
        "resume": "slurm_nodes",
        "snapshot": "snapshot",
        "watch": "watch",
    },
}


class _CommandsOnDemand(MutableMapping[str, Any]):  # values: typer's click commands
    """A group's commands: looking one up imports the modules that register it, listing them
    imports all. `modules` is COMMAND_MODULES for the root, a SUBCOMMAND_MODULES row (under
    the group's name, `group`) for a group; help lists the commands made with the group first,
    then the table's in its order."""

    def __init__(
        self,
        modules: Mapping[str, tuple[str, ...]],
        built: dict[str, Any],
        help_names: list[str],
        group: str | None = None,
    ):
        self._modules, self._built, self._help_names, self._group = modules, built, help_names, group

    def _load(self, name: str) -> None:
        if name in self._built or name not in self._modules:
            return
        # A Ctrl-C inside an import can surface as another error (a RuntimeError from a class
        # being built): it is held until the modules are in, then raised as itself.
        with held():
            for module in self._modules[name]:
                importlib.import_module(f"computefence.cli.{module}")
        tidy_help(app)
        # typer turns what the modules registered on `app` into click commands, the group's
        # among them (its commands are this class again).
        commands: Any = typer.main.get_group(app).commands
        if self._group is not None:
            commands = commands[self._group].commands
        for made_name, command in commands.made.items():
            if made_name not in self._built:
                flags_without_type(command, self._help_names)
                self._built[made_name] = command

    @property
    def made(self) -> dict[str, Any]:
        """The commands made so far, without importing any other."""
        return self._built

    def __getitem__(self, name: str) -> Any:
        self._load(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        for name in self._modules:
            self._load(name)
        return iter(
            [*(n for n in self._built if n not in self._modules), *(n for n in self._modules if n in self._built)]
        )

    def __len__(self) -> int:
        return len(list(iter(self)))


class _Group(TyperGroup):
    """A command group; its subcommands of SUBCOMMAND_MODULES are made when first used."""

    def __init__(self, **attrs: object):
        super().__init__(**attrs)  # type: ignore[arg-type]
        if self.name in SUBCOMMAND_MODULES:
            help_names = self.context_settings.get("help_option_names", ["--help"])
            modules = {name: (module,) for name, module in SUBCOMMAND_MODULES[self.name].items()}
            self.commands = _CommandsOnDemand(modules, dict(self.commands), help_names, self.name)


class _RootGroup(TyperGroup):
    def __init__(self, **attrs: object):
        super().__init__(**attrs)  # type: ignore[arg-type]
        help_names = self.context_settings.get("help_option_names", ["--help"])
        self.commands = _CommandsOnDemand(COMMAND_MODULES, dict(self.commands), help_names)


app = typer.Typer(
    name="computefence",
    cls=_RootGroup,
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


# The root's own help now; each command's when its modules load (_CommandsOnDemand).
tidy_help(app)


def group_defaulting_to(default: str) -> type[_Group]:
    """A command group in which `GROUP ARGS...` means `GROUP DEFAULT ARGS...` when ARGS does not
    start with one of its subcommands (`report FILE.json` is `report show FILE.json`)."""

    class DefaultingGroup(_Group):
        def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]  # typer.Context is click's
            if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
                args = [default, *args]
            return super().parse_args(ctx, args)

    return DefaultingGroup


def command_group(name: str, help: str, *, default: str | None = None) -> typer.Typer:
    """`computefence NAME SUBCOMMAND`: a group of commands, added to the app; `default`: the
    subcommand that `NAME ARGS...` means when ARGS names none."""
    group = typer.Typer(
        name=name,
        cls=group_defaulting_to(default) if default is not None else _Group,
        help=help,
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.add_typer(group, name=name)
    return group
