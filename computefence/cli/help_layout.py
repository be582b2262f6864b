"""Help that the renderer lays out at any width, applied once to every registered command.

- A docstring is written wrapped at the source's width; its paragraphs are joined into one
  line each here, so the terminal wraps them (no orphan word at 80 columns).
- A flag shows no type (typer's default is `<bool>`, but `--demo true` is refused).
- A choice option shows a word (`FORMAT`) and lists its choices in its help, where they
  wrap between words; typer's `<rich|json|markdown>` is folded inside a word in a narrow
  column.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Iterator
from typing import Any

import typer
from typer.models import CommandInfo, OptionInfo, TyperInfo


def tidy_help(app: typer.Typer) -> None:
    for command in _commands(app):
        callback = command.callback
        if callback is None:
            continue
        if command.help is None and callback.__doc__:
            command.help = unwrap(inspect.getdoc(callback) or "")
        for parameter in inspect.signature(callback, eval_str=True).parameters.values():
            _tidy_option(parameter)
    for group in app.registered_groups:
        info = group.typer_instance.info if group.typer_instance is not None else None
        if info is not None and isinstance(info.help, str):
            info.help = unwrap(info.help)


def built_command(app: typer.Typer) -> Any:
    """The click command typer builds for `app`, its flags (typer's own --install-completion
    and --show-completion included) shown without a type."""
    command = typer.main.get_command(app)
    flags_without_type(command, command.context_settings.get("help_option_names", ["--help"]))
    return command


def flags_without_type(command: Any, help_names: list[str]) -> None:
    """`command`'s flags, and its subcommands', shown without a type."""
    # The help option is made on first use and kept: make it now, to reach it.
    help_option = command.get_help_option(command.context_class(command, help_option_names=help_names))
    for param in [*command.params, help_option]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    commands = getattr(command, "commands", {})
    # The root's commands are made when first used (cli/app.py), and tidied then.
    for sub in getattr(commands, "made", commands).values():
        flags_without_type(sub, help_names)


def unwrap(text: str) -> str:
    """Each paragraph on one line; a paragraph with an indented line stays as written."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        p if any(line.startswith((" ", "\t")) for line in p.splitlines()) else " ".join(p.split("\n"))
        for p in paragraphs
    )


def _commands(app: typer.Typer) -> Iterator[CommandInfo | TyperInfo]:
    yield from app.registered_commands
    if app.registered_callback is not None:
        yield app.registered_callback
    for group in app.registered_groups:
        if group.typer_instance is not None:
            yield from _commands(group.typer_instance)


def _tidy_option(parameter: inspect.Parameter) -> None:
    annotation: Any = parameter.annotation
    info = parameter.default if isinstance(parameter.default, OptionInfo) else None
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        info = info or next((e for e in extras if isinstance(e, OptionInfo)), None)
        annotation = base
    if info is None or info.metavar is not None:
        return
    kind = _without_none(annotation)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        names = [str(member.value) for member in kind]
        long_name = next((d for d in _declarations(info) if d.startswith("--")), "--value")
        info.metavar = long_name.lstrip("-").upper()
        help_text = (info.help or "").rstrip()
        if not all(name in help_text for name in names):
            info.help = f"{help_text} One of: {', '.join(names)}.".lstrip()


def _declarations(info: OptionInfo) -> list[str]:
    found = [d for d in (info.param_decls or ()) if isinstance(d, str)]
    if isinstance(info.default, str) and info.default.startswith("-"):
        found.append(info.default)  # Annotated style: the first name sits in `default`
    return found


def _without_none(annotation: Any) -> Any:
    """`X | None` -> X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
        return arguments[0] if len(arguments) == 1 else annotation
    return annotation
