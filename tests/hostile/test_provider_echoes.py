"""A provider API (or whatever answers at --api-url) echoes the user's API key back in an error
body: lowercased, reversed, cut to a prefix, inside JSON. None of it reaches an error line."""

from __future__ import annotations

import json

import pytest

from computefence.errors import SourceError
from computefence.http import raise_for_status, scrub

KEY = "rpa_AbCdEfGhIjKlMnOpQrStUvWx1234"
ECHOES = {
    "exact": KEY,
    "lowercased": KEY.lower(),
    "uppercased": KEY.upper(),
    "reversed": KEY[::-1],
    "prefix": KEY[:12],
    "suffix": KEY[-9:],
    "middle": KEY[5:15],
}


@pytest.mark.parametrize("form", sorted(ECHOES))
def test_an_echoed_key_in_an_error_body_is_redacted(form):
    body = json.dumps({"error": f"invalid api key {ECHOES[form]}, please check"}).encode()
    with pytest.raises(SourceError) as caught:
        raise_for_status("RunPod", 401, {}, body, KEY, "set RUNPOD_API_KEY", "https://api.example")
    message = str(caught.value)
    assert "[redacted]" in message and "invalid api key" in message
    for run in _runs(KEY.lower(), 8) | _runs(KEY.lower()[::-1], 8):
        assert run not in message.lower()


def test_text_that_only_shares_short_runs_with_the_key_is_kept():
    assert scrub("rpa_Ab is a prefix; AbCdEfG too", KEY) == "rpa_Ab is a prefix; AbCdEfG too"


def test_a_short_key_is_still_removed_exactly():
    assert scrub("key abc123 rejected", "abc123") == "key [redacted] rejected"


def _runs(text: str, length: int) -> set[str]:
    return {text[i : i + length] for i in range(len(text) - length + 1)}
