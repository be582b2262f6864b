"""Renderers: Report -> text in one of FORMATS, and atomic writing of the result."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from computefence.errors import ConfigError
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


def write_output(text: str, path: str | os.PathLike) -> None:
    """Write `text` to `path` atomically: readers (a CI step, node_exporter) see the old
    file or the new one, never half of one."""
    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"--output {target} is a directory")
    directory = target.parent
    if not directory.is_dir():
        raise ConfigError(f"--output {target}: directory {directory} does not exist")
    data = text.encode("utf-8", "replace")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"--output {target}: cannot write in {directory}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; a report is for other readers too (node_exporter's user).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ConfigError(f"--output {target}: {exc.strerror or exc}") from None
        raise
