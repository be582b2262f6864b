"""Text from places we do not control (pods, provider APIs, inventories) made safe to show.

`clean` keeps the lines; `one_line` folds them into one line of at most `limit` characters,
the "..." marking a cut included. Every module that quotes such text uses these two.
"""

from __future__ import annotations

import unicodedata

# Bidirectional overrides can make a hostile hostname display as something else.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def clean(text: object) -> str:
    """Control characters (ESC included), lone surrogates and bidirectional overrides
    become '?'; newlines and tabs stay."""
    out = []
    for ch in str(text):
        if ch in "\n\t":
            out.append(ch)
        elif ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs"):
            out.append("?")
        else:
            out.append(ch)
    return "".join(out)


def one_line(text: object, limit: int | None = None) -> str:
    """`text` cleaned, its whitespace runs folded into single spaces, and at most `limit`
    characters long ("..." included) when a limit is given. None is the empty string."""
    flat = " ".join(clean("" if text is None else text).split())
    return flat if limit is None or len(flat) <= limit else flat[: max(0, limit - 3)] + "..."
