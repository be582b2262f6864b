"""What a long run shows on stderr while it runs, and how Ctrl-C stops it: shared by the
commands that probe pods (`fleet check`, `fleet snapshot`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from computefence.interrupt import sigint_ignored
from computefence.models import HostReport, HostStatus
from computefence.text import clean, unfiltered_stderr


@contextlib.contextmanager
def stop_on_sigint() -> Iterator[asyncio.Event]:
    """An event that the first Ctrl-C sets (the run stops and keeps what finished); a
    second Ctrl-C ends the program at once. Call it inside the running loop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_sigint() -> None:
        stop.set()
        loop.remove_signal_handler(signal.SIGINT)

    handled = False
    if not sigint_ignored():  # started with SIGINT ignored (`cmd &` in a script): stays so
        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            handled = True
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            pass
    try:
        yield stop
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)


_Count = TypeVar("_Count", bound="LiveCount")


class LiveCount:
    """done/total and failures so far, on stderr: a live line on a terminal, one plain line
    per item otherwise, none when quiet on a terminal."""

    def __init__(self, total: int, label: str, unit: str, quiet: bool = False):
        self.total, self.done, self.failed = total, 0, 0
        self.label, self.unit = label, unit
        self.console = Console(file=unfiltered_stderr())
        self.live = self.console.is_terminal and not quiet
        self.quiet = quiet
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self: _Count) -> _Count:
        if self.live:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self._text(), total=self.total)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _text(self, last: str = "") -> str:
        failed = f", {self.failed} failed" if self.failed else ""
        return f"{self.label}: {self.done}/{self.total} {self.unit}{failed}{last}"

    def advance(self, ok: bool, line: str, last: str = "") -> None:
        """One more item done: `line` is its plain line, `last` what the live line adds."""
        self.done += 1
        if not ok:
            self.failed += 1
        if self._progress is not None and self._task is not None:
            # Markup-escaped and cleaned: the live line is written unfiltered.
            self._progress.update(self._task, description=escape(clean(self._text(last))), completed=self.done)
        elif not self.quiet:
            print(f"computefence: [{self.done}/{self.total}] {line}", file=sys.stderr, flush=True)


class ProgressLine(LiveCount):
    """Pods checked so far; `update` is a run's on_progress."""

    def __init__(self, total: int, quiet: bool = False):
        super().__init__(total, "checking pods", "done", quiet)

    def update(self, host: HostReport) -> None:
        outcome = "checked" if host.status is HostStatus.OK else f"{host.status.value}: {host.reason}"
        self.advance(host.status is HostStatus.OK, f"{host.name}: {outcome}")
