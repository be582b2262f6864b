"""Options that several commands declare alike, given to each command as one value.

A command names one parameter (`selection`, `connection`); `option_group` declares the
group's options in its place, in --help order, and calls the command with the value that
`build` makes from them."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer

OptionSpec = tuple[str, Any, Any]  # parameter name, its Annotated type, its default


def option(flags: str, kind: Any, default: Any = None, **settings: Any) -> OptionSpec:
    """One option of a group: `flags` ("--ssh-host -H") name it and its parameter (ssh_host);
    `kind` is its type, `settings` the rest of its typer.Option (help, metavar, panel…)."""
    names = flags.split()
    return names[0].removeprefix("--").replace("-", "_"), Annotated[kind, typer.Option(*names, **settings)], default


def option_group(
    param: str, options: Sequence[OptionSpec], build: Callable[[dict[str, Any]], Any]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        params = list(signature.parameters.values())
        at = [p.name for p in params].index(param)
        declared = [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=kind)
            for name, kind, default in options
        ]

        @functools.wraps(command)
        def with_group(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name, _, _ in options}
            return command(*args, **{param: build(values)}, **kwargs)

        full = signature.replace(parameters=params[:at] + declared + params[at + 1 :])
        with_group.__signature__ = full  # type: ignore[attr-defined]  # what typer reads
        with_group.__annotations__ = {p.name: p.annotation for p in full.parameters.values()}
        return with_group

    return decorate
