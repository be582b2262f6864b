"""Renderers: Report -> text in one of FORMATS."""

from __future__ import annotations

from computefence.errors import ConfigError
# Moved to computefence.files; kept importable here while other branches still import it from here.
from computefence.files import write_output  # noqa: F401
from computefence.models import Report
from computefence.render import json, junit, markdown, prometheus, terminal
from computefence.render.interface import Renderer

FORMATS: dict[str, Renderer] = {
    "rich": terminal.render,
    "json": json.render,
    "junit": junit.render,
    "markdown": markdown.render,
    "prometheus": prometheus.render,
}


def render(report: Report, fmt: str, *, color: bool = False, width: int = 100) -> str:
    """The report as text. Only the rich format uses color and width."""
    if fmt == "rich":
        return terminal.render(report, color=color, width=width)
    try:
        renderer = FORMATS[fmt]
    except KeyError:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}") from None
    return renderer(report)
