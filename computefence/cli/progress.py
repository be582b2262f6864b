"""What a long run shows on stderr while it runs, and how Ctrl-C stops it: shared by the
commands that probe pods (`fleet check`, `fleet snapshot`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from computefence.models import HostReport, HostStatus
from computefence.text import unfiltered_stderr


@contextlib.contextmanager
def stop_on_sigint() -> Iterator[asyncio.Event]:
    """An event that the first Ctrl-C sets (the run stops and keeps what finished); a
    second Ctrl-C ends the program at once. Call it inside the running loop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_sigint() -> None:
        stop.set()
        loop.remove_signal_handler(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        handled = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        handled = False
    try:
        yield stop
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)


class ProgressLine:
    """done/total and failures so far, on stderr: a live line on a terminal, plain lines
    otherwise, none when quiet on a terminal. `update` is a run's on_progress."""

    def __init__(self, total: int, quiet: bool = False):
        self.total, self.done, self.failed = total, 0, 0
        self.console = Console(file=unfiltered_stderr())
        self.live = self.console.is_terminal and not quiet
        self.quiet = quiet
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressLine:
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

    def _text(self) -> str:
        failed = f", {self.failed} failed" if self.failed else ""
        return f"checking pods: {self.done}/{self.total} done{failed}"

    def update(self, host: HostReport) -> None:
        self.done += 1
        if host.status is not HostStatus.OK:
            self.failed += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=self._text(), completed=self.done)
            return
        if self.quiet:
            return
        outcome = "checked" if host.status is HostStatus.OK else f"{host.status.value}: {host.reason}"
        print(f"computefence: [{self.done}/{self.total}] {host.name}: {outcome}", file=sys.stderr, flush=True)
