"""What a long run shows on stderr while it runs: shared by the commands that probe pods
(`fleet check`, `fix`, `watch`, `snapshot`), given to their run session as its `progress`
and `note`."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

from computefence.models import HostReport, HostStatus
from computefence.text import clean, is_terminal, unfiltered_stderr

_Count = TypeVar("_Count", bound="LiveCount")


class LiveCount:
    """done/total and failures so far, on stderr: a live line on a terminal, one plain line
    per item otherwise, none when quiet on a terminal."""

    def __init__(self, total: int, label: str, unit: str, quiet: bool = False):
        self.total, self.done, self.failed = total, 0, 0
        self.label, self.unit = label, unit
        self.live = is_terminal(unfiltered_stderr()) and not quiet
        self.quiet = quiet
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self: _Count) -> _Count:
        if self.live:
            # Only a terminal shows the live line: a run into a pipe or a file (cron, CI) does
            # not import rich (~30 ms).
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=Console(file=unfiltered_stderr()),
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
            from rich.markup import escape

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


def progress_lines(
    quiet: bool = False,
) -> Callable[[int], contextlib.AbstractContextManager[Callable[[HostReport], None]]]:
    """A run session's progress: the pods checked so far, as ProgressLine shows them."""

    @contextlib.contextmanager
    def counting(total: int) -> Iterator[Callable[[HostReport], None]]:
        with ProgressLine(total, quiet) as line:
            yield line.update

    return counting


def note(line: str) -> None:
    """A run session's note (a source's warning, a re-probe starting), one line on stderr."""
    print(f"computefence: {line}", file=sys.stderr)


@contextlib.contextmanager
def collect_less_often() -> Iterator[None]:
    """A fleet's parsed facts are hundreds of thousands of long-lived objects. At the default
    thresholds the cyclic collector walks them some 750 times in a 1,000-pod check (0.5 CPU-s,
    an eighth of the run); every 50,000 allocations it takes 0.1 s (mypy raises it too). The
    connections' reference cycles are still collected, a little later. A pool's history (96
    runs of 1,000 pods read for one page) is the same case: 2 of its 3 CPU-s of reading."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)
