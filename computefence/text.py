"""Text from places we do not control (pods, provider APIs, inventories) made safe to show.

`clean` keeps the lines; `one_line` folds them into one line of at most `limit` characters,
the "..." marking a cut included. Every module that quotes such text uses these two. `plural`
counts in words ("1 pod", "2 pods") for every message alike.
"""

from __future__ import annotations

import contextlib
import os
import sys
import unicodedata
from collections.abc import Iterator
from typing import Any, TextIO

# Bidirectional overrides can make a hostile hostname display as something else.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def clean(text: object) -> str:
    """Control characters (ESC included), lone surrogates and bidirectional overrides
    become '?'; newlines and tabs stay."""
    string = str(text)
    if string.isprintable():  # in C: False for every character replaced below
        return string
    out = []
    for ch in string:
        if ch in "\n\t":
            out.append(ch)
        elif ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs"):
            out.append("?")
        else:
            out.append(ch)
    return "".join(out)


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 pod', '2 pods'; `many` where adding an s is wrong ('process', 'processes')."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def one_line(text: object, limit: int | None = None) -> str:
    """`text` cleaned, its whitespace runs folded into single spaces, and at most `limit`
    characters long ("..." included) when a limit is given. None is the empty string."""
    flat = " ".join(clean("" if text is None else text).split())
    return flat if limit is None or len(flat) <= limit else flat[: max(0, limit - 3)] + "..."


class _CleanStream:
    """A text stream whose every write passes through `clean`; `unfiltered` is the stream itself."""

    def __init__(self, inner: TextIO) -> None:
        self.unfiltered = inner

    def write(self, text: str) -> int:
        self.unfiltered.write(clean(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding
        return getattr(self.unfiltered, name)


@contextlib.contextmanager
def clean_stderr() -> Iterator[None]:
    """sys.stderr cleaned while a command runs: a pod's, provider's or inventory's text in a
    progress line, warning or message can never move the cursor, retitle the terminal or hide
    what follows (ESC, CR, BEL, bidi overrides), whichever module prints it."""
    saved = sys.stderr
    sys.stderr = _CleanStream(saved)
    try:
        yield
    finally:
        sys.stderr = saved


def unfiltered_stderr() -> TextIO:
    """The terminal itself, for a rich live line of ComputeFence's own text (its spinner's escapes)."""
    return getattr(sys.stderr, "unfiltered", sys.stderr)


def is_terminal(stream: TextIO) -> bool:
    """Whether rich would treat `stream` as a terminal (colors, live lines, its width). Into a
    pipe or a file, with neither FORCE_COLOR nor TTY_COMPATIBLE=1 set, the answer is no
    without importing rich (~25 ms of a run's start): a cron or CI run never draws."""
    if os.environ.get("TTY_COMPATIBLE") != "1" and not os.environ.get("FORCE_COLOR"):
        try:
            if not stream.isatty():
                return False
        except (AttributeError, ValueError):  # no isatty, or a closed stream: rich says no too
            return False
    from rich.console import Console

    return Console(file=stream).is_terminal
