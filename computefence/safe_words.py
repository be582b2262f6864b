"""Which pod values may be written into files that other programs read: shells, xargs, ssh, ssh_config.

Files such as the launch gate (`--healthy-out`) and `inventory export` are read by tools
whose grammar gives meaning to quotes, blanks, `-`, `@`, `%`, `#` and line breaks. Rather
than quote for every reader, a name, host or user is written only when it is a plain word
that every reader takes literally; anything else is refused, and the caller leaves that
pod out (fail closed). Each check returns None for a safe value, else why it is not.
"""

from __future__ import annotations

import re
import unicodedata

# A word no shell, xargs, ssh or ssh_config Host pattern reads as anything but itself:
# no leading '-' (an option), no '@' (ssh reads user@host), no quote, blank, '%', '#', '*', ','.
WORD_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=-]*\Z")
# A name in a NUL-separated list (xargs -0 reads no quoting): quotes, backslashes and blanks
# are themselves there; still no leading '-' (an option) and no '@' (ssh reads user@host).
NUL_LIST_WORD_RE = re.compile(r"[A-Za-z0-9_\"'\\ ][A-Za-z0-9_.+=\"'\\ -]*\Z")
HOSTNAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
IPV6_RE = re.compile(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\Z")
# A ProxyJump hop: [user@]host[:port], the host bare or in brackets (an IPv6 address).
_HOP_RE = re.compile(r"(?:(?P<user>[^@]+)@)?(?:\[(?P<bracketed>[^\]]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>\d{1,5}))?\Z")
_MAX = 255


def shown(value: str) -> str:
    """`value` quoted for a one-line message: control characters escaped, cut at 60 characters."""
    return repr(value if len(value) <= 60 else value[:57] + "...")


def unsafe_word(what: str, value: str) -> str | None:
    if len(value) <= _MAX and WORD_RE.match(value):
        return None
    return f"{what} {shown(value)} is not a plain word (letters, digits and . _ + = -, not starting with '-')"


def unsafe_nul_list_word(what: str, value: str) -> str | None:
    if len(value) <= _MAX and NUL_LIST_WORD_RE.match(value):
        return None
    return (
        f"{what} {shown(value)} is not a word xargs -0 hands on as itself "
        "(letters, digits, blanks, quotes, backslashes and . _ + = -, not starting with '-')"
    )


def unsafe_host(what: str, value: str) -> str | None:
    if len(value) <= _MAX and (HOSTNAME_RE.match(value) or IPV6_RE.match(value)):
        return None
    return f"{what} {shown(value)} is not a host name or IP address"


def unsafe_user(what: str, value: str) -> str | None:
    if len(value) <= _MAX and HOSTNAME_RE.match(value):
        return None
    return f"{what} {shown(value)} is not a plain user name (letters, digits and . _ -, not starting with '-')"


def unsafe_proxy_jump(value: str) -> str | None:
    """Each hop a user, host and port that ssh reads as such, never an option or a URI."""
    for hop in value.split(","):
        match = _HOP_RE.match(hop)
        if match is None:
            return f"proxy_jump hop {shown(hop)} is not [user@]host[:port]"
        host = match["host"] or match["bracketed"]
        problem = unsafe_host("proxy_jump host", host) or (
            match["user"] and unsafe_user("proxy_jump user", match["user"])
        )
        if problem:
            return problem
    return None


def unprintable(value: str) -> str | None:
    """The first character no line-based file can hold as text: a control character, a line or
    paragraph separator (YAML and Python read U+2028 and U+0085 as line breaks), a format character."""
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            return f"U+{ord(ch):04X}"
    return None


def comment_text(text: object, limit: int = 200) -> str:
    """Text for a `#` comment line: every line break and control character removed, blanks folded."""
    kept = "".join(ch if unprintable(ch) is None else " " for ch in str(text))
    flat = " ".join(kept.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
