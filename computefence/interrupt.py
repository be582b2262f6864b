"""Ctrl-C while the CLI starts: held, never raised mid-step, and acted on where the step ends.

A KeyboardInterrupt raised in the middle of an import or of the demo fleet's start can be
lost (a library's import that catches too much, a server half started) or leave CPython to
report a traceback. Inside `held()` a Ctrl-C is only recorded; on leaving it, a recorded one
is raised as KeyboardInterrupt at that clean point, which the CLI turns into one line and
exit 130. Work that blocks in threads (provider calls) runs in `each_in_a_thread`, whose wait
a Ctrl-C ends at once. Stdlib only: the entry point uses it before anything else is imported.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")
R = TypeVar("R")

_received: list[int] = []
# Whether this command has printed its interrupt line (typer turns a KeyboardInterrupt that
# reaches it into a silent 130, so the CLI prints one where nothing did).
_said: list[str] = []


# Every Ctrl-C this process has had, however it was acted on.
_interrupted: list[int] = []


def _record(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    _interrupted.append(signum)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    _interrupted.append(signum)
    raise KeyboardInterrupt


def _quiet_after_interrupt(unraisable: Any) -> None:
    """A Ctrl-C can land inside a constructor (an event loop half built by asyncio.run); the
    object then fails in its __del__ when collected, and Python reports it ("Exception
    ignored in …"). The command is leaving with its one line: such reports stay silent then,
    and are Python's own otherwise."""
    if not _interrupted:
        sys.__unraisablehook__(unraisable)


def install_for_the_cli() -> None:
    """At the entry point, before anything else: Ctrl-C raises KeyboardInterrupt as Python's
    own handler does, and is remembered, so nothing that it cut short reports afterwards."""
    sys.unraisablehook = _quiet_after_interrupt
    if threading.current_thread() is threading.main_thread() and not sigint_ignored():
        signal.signal(signal.SIGINT, _raise_interrupt)


@contextmanager
def held() -> Iterator[None]:
    """Ctrl-C recorded, not raised, inside; raised as KeyboardInterrupt on leaving if one
    came (an exception of the block's own stands). Outside the main thread, where Python
    delivers no signal, or where Ctrl-C is ignored, it changes nothing."""
    if threading.current_thread() is not threading.main_thread() or sigint_ignored():
        yield
        return
    previous = signal.signal(signal.SIGINT, _record)
    try:
        yield
    except BaseException:
        signal.signal(signal.SIGINT, previous)
        raise
    signal.signal(signal.SIGINT, previous)
    if _received:
        _received.clear()
        raise KeyboardInterrupt


@contextmanager
def stop_on_sigint() -> Iterator[asyncio.Event]:
    """An event that the first Ctrl-C sets (the run stops and keeps what finished); a
    second Ctrl-C ends the program at once. Call it inside the running loop."""
    import asyncio  # not for the entry point's start: only a run that probes needs it

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_sigint() -> None:
        _interrupted.append(signal.SIGINT)
        stop.set()
        loop.remove_signal_handler(signal.SIGINT)
        _restore(previous)

    previous = signal.getsignal(signal.SIGINT)
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
        # asyncio puts Python's default handler back; the one before stays (see install_for_the_cli).
        if handled and loop.remove_signal_handler(signal.SIGINT):
            _restore(previous)


def _restore(handler: Any) -> None:
    if handler is not None:  # None: a handler not set from Python, which cannot be put back
        signal.signal(signal.SIGINT, handler)


def sigint_ignored() -> bool:
    """Whether this process was started with SIGINT ignored (a background job of a
    non-interactive shell, nohup): it keeps ignoring it throughout, as Python and ssh do."""
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def ignore_from_now() -> None:
    """A Ctrl-C from here on is recorded and dropped: the exit status is decided and the
    process is leaving (a KeyboardInterrupt in an atexit handler would print a traceback)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _record)


def say_interrupted(line: str = "computefence: interrupted") -> None:
    """Print the one line of an interrupted command on stderr (what it kept, if anything)."""
    print(line, file=sys.stderr, flush=True)
    _said.append(line)


def said_interrupted(forget: bool = False) -> bool:
    """Whether the interrupt line was printed; `forget`: and start afresh (a new command)."""
    said = bool(_said)
    if forget:
        _said.clear()
    return said


def left_untouched(outputs: dict[str, Path | None]) -> str:
    """The interrupt line's tail naming the files an interrupted run did not write, by flag."""
    kept = [f"{flag} {path}" for flag, path in outputs.items() if path is not None]
    return f"; nothing written ({', '.join(kept)} left untouched)" if kept else ""


def each_in_a_thread(work: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`work(item)` for every item at once, each in a daemon thread; the results in order, or
    the first item's exception. A Ctrl-C ends the wait at once: a thread blocked in a read
    that may take its whole deadline (a provider trickling its answer) is left behind and
    ends with the process, which never waits for it (a ThreadPoolExecutor's would)."""
    outcomes: list[dict[str, Any]] = [{} for _ in items]
    threads = []
    for item, outcome in zip(items, outcomes):

        def run(item: T = item, outcome: dict[str, Any] = outcome) -> None:
            try:
                outcome["value"] = work(item)
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc

        threads.append(threading.Thread(target=run, name="computefence-each", daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for outcome in outcomes:
        if "error" in outcome:
            raise outcome["error"]
    return [outcome["value"] for outcome in outcomes]
