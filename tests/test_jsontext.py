"""JSON from pods and APIs holds no lone surrogate once parsed, whatever the bytes were."""

import json

import pytest

from computefence import jsontext


@pytest.mark.parametrize(
    "raw, expected",
    [
        (b'"a\\udcffb"', "a?b"),  # a lone low surrogate escape
        (b'"a\\uD800b"', "a?b"),  # a lone high one, upper-case hex
        (b'"a\\ud800\\u0041"', "a?A"),  # high surrogate followed by something that is not its pair
        (b'"a\xffb"', "a?b"),  # an undecodable byte
        (b'"\\ud83d\\ude00 \xc3\xa9"', "\U0001f600 \u00e9"),  # a real pair and valid UTF-8 stay
        (b'"\\\\udcff"', "\\udcff"),  # an escaped backslash then letters: not an escape
        (b'"\\\\\\udcff"', "\\?"),  # an escaped backslash, then a real lone escape
    ],
)
def test_lone_surrogates_become_question_marks_and_nothing_else_changes(raw, expected):
    value = jsontext.loads(raw)
    assert value == expected
    value.encode("utf-8")


def test_nested_keys_and_values_are_cleaned_in_the_same_pass():
    raw = json.dumps({"k\udcff": [{"v": "x\udcff"}]}).encode()  # json.dumps escapes them as \udcff
    assert jsontext.loads(raw) == {"k?": [{"v": "x?"}]}


def test_text_without_surrogates_is_returned_as_is():
    text = '{"a": "plain \\u00e9 \\n \\\\"}'
    assert jsontext.utf8_text(text) is text
