"""Renderers: Report -> text in one of FORMATS.

FORMATS is the one table of output formats, name -> Renderer class (render/interface.py).
A new format is one module with its Renderer and one row here. A format's module is
imported when the format is used, so a command pays only for the one it writes.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from computefence.errors import ConfigError
from computefence.models import Changes, Report
from computefence.render.interface import Renderer

# name -> (module in computefence.render, its Renderer class)
_FORMAT_CLASSES = {
    "rich": ("terminal", "TerminalRenderer"),
    "json": ("json", "JsonRenderer"),
    "junit": ("junit", "JunitRenderer"),
    "markdown": ("markdown", "MarkdownRenderer"),
    "prometheus": ("prometheus", "PrometheusRenderer"),
    "html": ("html", "HtmlRenderer"),
}


class _Renderers(Mapping[str, type[Renderer]]):
    def __getitem__(self, name: str) -> type[Renderer]:
        module, cls = _FORMAT_CLASSES[name]
        made: type[Renderer] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(_FORMAT_CLASSES)

    def __len__(self) -> int:
        return len(_FORMAT_CLASSES)


FORMATS: Mapping[str, type[Renderer]] = _Renderers()


if TYPE_CHECKING:
    # The formats that can show what changed between two runs alone (`report diff`).
    CHANGES_FORMATS: tuple[str, ...]


def _changes_formats() -> tuple[str, ...]:
    return tuple(name for name, made in FORMATS.items() if made.shows_changes)


def __getattr__(name: str) -> Any:
    if name == "CHANGES_FORMATS":  # read from every format's class: all are imported
        return _changes_formats()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    shown = _changes_formats()
    if fmt not in shown:
        raise ConfigError(f"unknown format {fmt!r} for changes; choose one of: {', '.join(shown)}")
    return renderer(fmt, **options).render_changes(changes)
