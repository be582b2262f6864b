"""computefence.text: the one way text from pods and servers is shown, and its one limit rule."""

from __future__ import annotations

import os
import pty

import pytest

from computefence.text import clean, is_terminal, one_line


def test_clean_replaces_controls_surrogates_and_bidi_overrides_but_keeps_lines():
    assert clean("a\x1b[31mb\udc80c\u202ed\n\te") == "a?[31mb?c?d\n\te"


@pytest.mark.parametrize(
    "text, limit, expected",
    [
        ("  one\n two\tthree  ", None, "one two three"),
        (None, None, ""),
        ("x" * 10, 10, "x" * 10),
        ("x" * 11, 10, "x" * 7 + "..."),
        ("ab\x07cd", 80, "ab?cd"),
        (ValueError("boom\nat line 2"), 80, "boom at line 2"),
    ],
)
def test_one_line_folds_and_cuts_within_the_limit(text, limit, expected):
    assert one_line(text, limit) == expected
    assert limit is None or len(one_line(text, limit)) <= limit


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"FORCE_COLOR": "1"},
        {"FORCE_COLOR": ""},
        {"TTY_COMPATIBLE": "1"},
        {"TTY_COMPATIBLE": "0"},
        {"NO_COLOR": "1"},
    ],
)
@pytest.mark.parametrize("kind", ["pipe", "pty", "file"])
def test_is_terminal_answers_as_rich_does(kind, env, monkeypatch, tmp_path):
    from rich.console import Console

    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if kind == "pipe":
        read, write = os.pipe()
        os.close(read)
    elif kind == "pty":
        write, other = pty.openpty()
        os.close(other)
    else:
        write = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    with os.fdopen(write, "w") as stream:
        assert is_terminal(stream) is Console(file=stream).is_terminal
