"""JSON from untrusted bytes (pods, provider APIs), with lone surrogates already gone.

An undecodable byte, or a JSON escape such as "\\udcff" with no partner, would reach a model
as a lone surrogate that no UTF-8 writer accepts. Both become "?" here in one pass over the
text, before parsing, so nothing downstream has to walk the parsed values again.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Scanned left to right, an escaped backslash is consumed whole, so "\\\\udcff" (a backslash,
# then the letters) is left alone; a surrogate pair escape is kept; what remains is lone.
_SURROGATE = re.compile(
    r"\\\\|\\u(?:d[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|d[89a-f][0-9a-f]{2})|[\ud800-\udfff]",
    re.IGNORECASE,
)


def _lone_to_question_mark(match: re.Match[str]) -> str:
    text = match.group()
    return text if text == "\\\\" or len(text) == 12 else "?"


def utf8_text(raw: bytes | str) -> str:
    """`raw` as text holding no lone surrogate, neither as a character nor as a JSON escape."""
    if isinstance(raw, bytes):
        try:
            text, dirty = raw.decode("utf-8"), False
        except UnicodeDecodeError:
            text, dirty = raw.decode("utf-8", "surrogateescape"), True
    else:
        text, dirty = raw, not raw.isascii()
    if dirty or "\\ud" in text or "\\uD" in text:
        text = _SURROGATE.sub(_lone_to_question_mark, text)
    return text


def loads(raw: bytes | str) -> Any:
    """json.loads of `raw`, every string in the result writable as UTF-8."""
    return json.loads(utf8_text(raw))
