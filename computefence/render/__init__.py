"""Renderers: Report -> text in one of FORMATS.

FORMATS is the one table of output formats, name -> Renderer class (render/interface.py).
A new format is one module with its Renderer and one row here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from computefence.errors import ConfigError
from computefence.models import Changes, Report
from computefence.render.html import HtmlRenderer
from computefence.render.interface import Renderer
from computefence.render.json import JsonRenderer
from computefence.render.junit import JunitRenderer
from computefence.render.markdown import MarkdownRenderer
from computefence.render.prometheus import PrometheusRenderer
from computefence.render.terminal import TerminalRenderer

FORMATS: dict[str, type[Renderer]] = {
    "rich": TerminalRenderer,
    "json": JsonRenderer,
    "junit": JunitRenderer,
    "markdown": MarkdownRenderer,
    "prometheus": PrometheusRenderer,
    "html": HtmlRenderer,
}
# The formats that can show what changed between two runs alone (`report diff`).
CHANGES_FORMATS: tuple[str, ...] = tuple(name for name, renderer in FORMATS.items() if renderer.shows_changes)


def renderer(fmt: str, **options: Any) -> Renderer:
    """The `fmt` renderer with its options (color, width, group_by, quiet)."""
    made = FORMATS.get(fmt)
    if made is None:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return made(**options)


def render(report: Report, fmt: str, **options: Any) -> str:
    """The report as `fmt` text."""
    return renderer(fmt, **options).render(report)


def render_pieces(report: Report, fmt: str, **options: Any) -> Iterable[str]:
    """The report's text in pieces to write one after another: a JSON report of a thousand
    pods a host at a time, never one string (nor its bytes besides)."""
    return renderer(fmt, **options).render_chunks(report)


def render_changes(changes: Changes, fmt: str, **options: Any) -> str:
    """What changed between two runs, alone (`report diff`)."""
    if fmt not in CHANGES_FORMATS:
        raise ConfigError(f"unknown format {fmt!r} for changes; choose one of: {', '.join(CHANGES_FORMATS)}")
    return renderer(fmt, **options).render_changes(changes)
