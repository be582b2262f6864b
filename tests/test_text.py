"""computefence.text: the one way text from pods and servers is shown, and its one limit rule."""

from __future__ import annotations

import pytest

from computefence.text import clean, one_line


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
