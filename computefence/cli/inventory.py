"""`computefence inventory list|export`: the targets a fleet check would use, without connecting."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from computefence.cli.app import command_group
from computefence.cli.output import write_stdout
from computefence.cli.targets import gather_targets, target_options
from computefence.connectors.registry import CONNECTORS, reached_as
from computefence.errors import ConfigError, SourceError
from computefence.files import write_output
from computefence.models import SourceStatus, Target, TargetList
from computefence.render.columns import Column, Hanging, fit_table, records
from computefence.render.console import console_text
from computefence.sources import TargetSelection
from computefence.sources.export import EXPORT_FORMATS
from computefence.text import clean, plural

inventory_app = command_group(
    "inventory", "Show or export the targets a fleet check would use (nothing is connected to)."
)


class ListFormat(str, Enum):
    rich = "rich"
    json = "json"


ExportFormat = Enum("ExportFormat", {name: name for name in EXPORT_FORMATS}, type=str)  # type: ignore[misc]  # members from a registry table


def proxy_text(target: Target) -> str:
    """The hop in between, in ssh's words: `-J bastion` or `ProxyCommand ssh -W %h:%p bastion`."""
    if target.proxy_jump:
        return f"-J {target.proxy_jump}"
    return f"ProxyCommand {target.proxy_command}" if target.proxy_command else ""


def _home_short(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home) :] if path.startswith(home + "/") else path


def _provider_text(target: Target) -> str:
    info = target.provider
    if info is None:
        return ""
    parts = [f"{info.provider} {info.pod_id}"]
    if info.gpu_type:
        parts.append(f"{info.gpu_count or 1}x {info.gpu_type}")
    if info.cost_per_hour is not None:
        parts.append(f"${info.cost_per_hour:.2f}/h")
    if info.state and target.unreachable_reason:
        parts.append(info.state)
    return ", ".join(parts)


def _source_error(status: SourceStatus) -> str:
    error = status.error or "failed"
    return error if error.startswith(status.name) else f"{status.name}: {error}"


def _text(value: str, style: str = "", no_wrap: bool | None = None) -> Text:
    """A cell of the table: the text of a target, a provider or an inventory, its control
    characters (ESC included) shown, never sent to the terminal."""
    return Text(clean(value), style=style, no_wrap=no_wrap)


def _render_rich(targets: list[Target], sources: list[SourceStatus]) -> None:
    over_ssh = CONNECTORS["ssh"].reaches
    console = Console(highlight=False)
    checkable = [t for t in targets if not t.unreachable_reason]
    blocked = [t for t in targets if t.unreachable_reason]
    out: list[RenderableType] = []
    if targets:
        # Columns with nothing to say (no proxy, the default python, no tags or provider on any
        # target) are left out; on a narrow terminal one that holds the same value on every
        # row is said above the table, and where no table fits each target is a record
        # (see render/columns.py): no value is ever dropped.
        columns: dict[str, tuple[Column, Callable[[Target], Text]]] = {
            "target": (Column("target"), lambda t: _text(t.name)),
            "reached as": (
                Column("reached as"),
                lambda t: _text(reached_as(t)) if not t.unreachable_reason else _text("not checkable", style="red"),
            ),
            "via": (Column("via", breaks=" ", drop=4), lambda t: _text(proxy_text(t))),
            "identity": (
                Column("identity", "key", breaks=", "),
                lambda t: _text(
                    (
                        ", ".join(_home_short(p) for p in t.identity_files)
                        or ("ssh default" if t.default_identities else "agent only")
                    )
                    if over_ssh(t)
                    else ""
                ),
            ),
            "python": (Column("python", drop=1), lambda t: _text(t.python)),
            "tags": (Column("tags", breaks=", ", drop=2), lambda t: _text(", ".join(t.tags))),
            "source": (Column("source", drop=3), lambda t: _text(t.source or "")),
            "provider": (Column("provider", breaks=", "), lambda t: _text(_provider_text(t))),
        }
        if not any(t.proxy_jump or t.proxy_command for t in targets):
            del columns["via"]
        if not any(over_ssh(t) for t in targets):
            del columns["identity"]
        if all(t.python == "python3" for t in targets):
            del columns["python"]
        if not any(t.tags for t in targets):
            del columns["tags"]
        if not any(t.provider for t in targets):
            del columns["provider"]
        rows = [[cell(t) for _, cell in columns.values()] for t in targets]
        chosen = [column for column, _ in columns.values()]
        table = fit_table(chosen, rows, console.width, noun="target")
        out.extend(table if table is not None else records(chosen, rows, console.width))
    for t in blocked:
        out.append(_text(f"{t.name}: not checkable: {(t.unreachable_reason or '').rstrip('.')}.", style="red"))
        if t.unreachable_fix:
            # A command is pasted: never folded (console_text prints no_wrap text whole).
            out += [_text(f"  fix: {command}", style="red", no_wrap=True) for command in t.unreachable_fix.commands]
            if t.unreachable_fix.advice:
                out.append(Hanging(_text("  note: ", style="red"), _text(t.unreachable_fix.advice, style="red")))
    out += [_text(f"source failed: {_source_error(s)}", style="bold red") for s in sources if not s.ok]
    out += [_text(f"{s.name}: resolved by {s.resolver}") for s in sources if s.resolver]
    counted = f"{plural(len(checkable), 'target')} to check"
    if blocked:
        counted += f", {len(blocked)} not checkable"
    out.append(_text(f"{counted}, from {plural(len(sources), 'source')}; nothing was connected to."))
    color = console.is_terminal and not console.no_color
    console.file.write(console_text(out, color=color, width=console.width))


@inventory_app.command("list")
@target_options
def list_targets(
    selection: TargetSelection = TargetSelection(),
    fmt: Annotated[ListFormat, typer.Option("--format", "-f", help="rich (a table) or json.")] = ListFormat.rich,
) -> int:
    """Show what a fleet check would check and how each target is reached. Exit 1 if a source failed."""
    targets, sources = gather_targets(selection)
    if fmt is ListFormat.json:
        # Serialized by pydantic-core (8 times the stdlib's indenting encoder at 100,000 targets);
        # ASCII with \u escapes as before, whatever stdout's encoding.
        document = TargetList(targets=targets, sources=sources)
        write_stdout(document.model_dump_json(indent=2, ensure_ascii=True) + "\n")
    else:
        _render_rich(targets, sources)
    return 1 if any(not s.ok for s in sources) else 0


@inventory_app.command("export")
@target_options
def export_targets(
    selection: TargetSelection = TargetSelection(),
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="yaml (a ComputeFence inventory) or ssh-config.")
    ] = ExportFormat("yaml"),
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here (atomically) instead of stdout.")
    ] = None,
) -> int:
    """Write the targets as a ComputeFence inventory or an ssh_config block. Refuses if a source failed."""
    targets, sources = gather_targets(selection)
    failed = [s for s in sources if not s.ok]
    if failed:
        # A partial export would silently drop pods from every later check.
        raise SourceError(f"{_source_error(failed[0])}; nothing exported")
    skipped = sum(1 for t in targets if t.unreachable_reason)
    if skipped == len(targets):
        what = f"none of the {len(targets)} targets can be checked" if targets else "no targets"
        raise ConfigError(f"nothing to export: {what}")
    text = EXPORT_FORMATS[fmt.value](targets)
    if skipped:
        print(
            f"computefence: left out {plural(skipped, 'target')} that cannot be checked (listed in the header)",
            file=sys.stderr,
        )
    if output is None:
        write_stdout(text)
    else:
        write_output(text, output)
        print(f"computefence: wrote {plural(len(targets) - skipped, 'target')} to {output}", file=sys.stderr)
    return 0
