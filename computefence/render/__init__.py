"""Renderers: Report -> text in one of FORMATS."""

from __future__ import annotations

from collections.abc import Iterable

from computefence.errors import ConfigError
from computefence.models import Changes, Report
from computefence.render import html, json, junit, markdown, prometheus, terminal
from computefence.render.interface import Renderer

FORMATS: dict[str, Renderer] = {
    "rich": terminal.render,
    "json": json.render,
    "junit": junit.render,
    "markdown": markdown.render,
    "prometheus": prometheus.render,
    "html": html.render,
}


def render(
    report: Report, fmt: str, *, color: bool = False, width: int = 100, group_by: str = "check", quiet: bool = False
) -> str:
    """The report as text. Only the rich format uses color and width; rich and markdown
    group by pod or check, and rich alone has a quiet form."""
    if fmt == "rich":
        return terminal.render(report, color=color, width=width, group_by=group_by, quiet=quiet)
    if fmt == "markdown":
        return markdown.render(report, group_by=group_by)
    try:
        renderer = FORMATS[fmt]
    except KeyError:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}") from None
    return renderer(report)


def render_pieces(report: Report, fmt: str, **style) -> Iterable[str]:
    """The report's text in pieces to write one after another: a JSON report of a thousand
    pods a host at a time, never one string (nor its bytes besides)."""
    if fmt == "json":
        return json.render_chunks(report)
    return [render(report, fmt, **style)]


CHANGES_FORMATS = ("rich", "json", "markdown")


def render_changes(changes: Changes, fmt: str, *, color: bool = False, width: int = 100) -> str:
    """What changed between two runs, alone (`report diff`)."""
    if fmt == "rich":
        return terminal.render_changes(changes, color=color, width=width)
    if fmt == "markdown":
        return "\n".join(markdown.changes_section(changes)).rstrip() + "\n"
    if fmt == "json":
        return changes.model_dump_json(indent=2) + "\n"
    raise ConfigError(f"unknown format {fmt!r} for changes; choose one of: {', '.join(CHANGES_FORMATS)}")
