"""Secrets taken out of text that came from a pod or a provider, before any report, record or
transcript holds it.

`redact` is the one client-side redaction. It replaces with `***`: credentials in URLs
(`scheme://user:pass@`, and `user:pass@host` without a scheme), the value of an assignment or
header whose name says secret (`HF_TOKEN=`, `"api_key": "..."`, `Authorization: Bearer ...`,
`--password ...`), private key blocks, and values shaped like the keys of Hugging Face,
GitHub, AWS, RunPod, Vast.ai, OpenAI, Slack, GitLab and JWTs, whatever their name.

The probe redacts on the pod as well; this runs again on the client because a pod may be
hostile or run an older probe, and because fix steps, custom checks and provider answers never
pass through the probe's redaction.

Every pass is linear in the text: each pattern can start only where a word starts (a
look-behind rejects every other position at once), its repeats are possessive (nothing is
scanned twice by backtracking), and no repeat can run past the next place where another
attempt could start.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated

from pydantic import AfterValidator

MASK = "***"
# What a value already masked reads as (here, by the probe, or by http.scrub).
_ALREADY_MASKED = frozenset({MASK, "[redacted]"})

_PRIVATE_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_PRIVATE_KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")

# scheme://userinfo@ ; userinfo may hold unescaped `@` and `/` (pip prints what it was given),
# so it runs to the last `@` before whitespace, a quote, or the next `://`.
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*+://)(?:(?:(?!://)[^\s@'\"<>`])*+@)++(?=[^\s@'\"<>`])"
)
# user:password@host without a scheme (git, rsync, proxies). The password may hold `:` and `@`
# (as typed), so it runs to the last `@` before a host; the run stops at the characters that
# may start another attempt, so no character is scanned by more than two attempts.
_BARE_STOP = r"\s,;=(\[{'\"<>`"
_BARE_USERINFO = re.compile(rf"(?<![^{_BARE_STOP}])([^{_BARE_STOP}:/@]++):([^{_BARE_STOP}/]++)")
_HOST_START = re.compile(r"[A-Za-z0-9\[]")

# NAME followed by `=`, `:` (optionally after its closing quote) or, for a --flag, blanks.
_ASSIGNED = re.compile(r"(?<![A-Za-z0-9_.\-])(-{0,2}[A-Za-z_][A-Za-z0-9_.\-]*+)(?:(['\"]?+[ \t]*+[=:][ \t]*+)|[ \t]++)")
# The value after a secret name: quoted (to its closing quote or the line's end), a scheme and
# its credential (Bearer, Basic, token), or one word.
_VALUE = re.compile(
    r"\"[^\"\n]*+\"?+|'[^'\n]*+'?+"
    r"|(?i:bearer|basic|token|digest)[ \t]++[^\s'\",;}]++"
    r"|[^\s'\",;}]++"
)
_NAME_WORDS = re.compile(r"[_.\-]++|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "PWD",
        "KEY",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
        "COOKIE",
    }
)
_SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "ACCESSKEY", "PRIVATEKEY")
# The shell's working directories: named like a password, never one.
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
# Cheap tests first (most text holds no secret): every secret name holds one of these words,
# every key shape but Vast's starts with one of these prefixes (all in lower case).
_NAME_HINTS = ("token", "secret", "pass", "pwd", "key", "credential", "auth", "cookie")
_SHAPE_HINTS = ("hf_", "gh", "github_pat_", "akia", "asia", "abia", "acca", "rpa_", "sk-", "xox", "glpat-", "eyj")
_HEX_RUN = re.compile(r"[0-9a-f]{64}")
# The hints as one search each: redact() runs on every finding's message (15 a pod).
_NAME_HINT = re.compile("|".join(map(re.escape, _NAME_HINTS)))
_SHAPE_HINT = re.compile("|".join(map(re.escape, _SHAPE_HINTS)))

# Key shapes, each as a whole word.
_KEY_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"hf_[A-Za-z0-9]{20,}+"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_[A-Za-z0-9_]{20,}+"  # GitHub
    r"|(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}+"  # AWS access key id
    r"|rpa_[A-Za-z0-9]{16,}+"  # RunPod
    r"|sk-[A-Za-z0-9_\-]{20,}+"  # OpenAI, Anthropic
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}+"  # Slack
    r"|glpat-[A-Za-z0-9_\-]{20,}+"  # GitLab
    r"|eyJ[A-Za-z0-9_\-]{8,}+\.eyJ[A-Za-z0-9_\-]++\.[A-Za-z0-9_\-]*+"  # JWT
    r")(?![A-Za-z0-9_\-])"
    # Vast.ai: 64 hex digits (a sha256 digest says so: `sha256:` / `sha256=` before it).
    r"|(?<![A-Za-z0-9])(?<!sha256:)(?<!sha256=)[0-9a-f]{64}+(?![A-Za-z0-9])"
)


def secret_name(name: str) -> bool:
    """Whether a variable, key, header or flag name says its value is a secret: one of its
    words (split at `_ . -` and camelCase) is TOKEN, KEY, SECRET, PASSWORD and the like, or
    ends in one (APIKEY, ACCESSTOKEN)."""
    bare = name.strip("-")
    if bare.upper() in _NOT_SECRET_NAMES:
        return False
    for word in _NAME_WORDS.split(bare):
        upper = word.upper()
        if upper in _SECRET_WORDS or upper.endswith(_SECRET_ENDINGS):
            return True
    return False


def redact(text: str) -> str:
    """`text` with every secret it holds replaced by ***; linear in its length."""
    return _redact(text) if not text or len(text) > _MEMO_TEXT_CHARS else _redact_short(text)


# The short texts a pool repeats (a pod's 15 finding messages and its environment values,
# mostly the same words on every pod of a pool) are redacted once per run, not once per pod:
# 23 redactions a pod were ~60 ms of a 1,000-pod check. Bounded in entries and in length.
_MEMO_TEXT_CHARS = 256


@functools.lru_cache(maxsize=2048)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    if not text:
        return text
    lowered = text.lower()
    if "private key-----" in lowered:
        text = _private_keys(text)
    if "@" in text:
        text = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
        text = _BARE_USERINFO.sub(_bare_userinfo, text)
    if _NAME_HINT.search(lowered):
        text = _assignments(text)
    if _SHAPE_HINT.search(lowered) or (len(text) >= 64 and _HEX_RUN.search(text)):
        text = _KEY_SHAPES.sub(MASK, text)
    return text


def redact_lines(lines: list[str]) -> list[str]:
    return [redact(line) for line in lines]


def _bare_userinfo(match: re.Match[str]) -> str:
    rest, text, start = match.group(2), match.string, match.start(2)
    at = rest.rfind("@")
    while at > 0 and not _HOST_START.match(text, start + at + 1):
        at = rest.rfind("@", 0, at)
    if at <= 0:  # no host after an `@`: not a credential
        return match.group(0)
    return f"{match.group(1)}:{MASK}{rest[at:]}"


def _private_keys(text: str) -> str:
    out: list[str] = []
    position = 0
    while (begin := _PRIVATE_KEY_BEGIN.search(text, position)) is not None:
        end = _PRIVATE_KEY_END.search(text, begin.end())
        out += [text[position : begin.end()], MASK]
        if end is None:  # cut off: everything after the header is the key
            return "".join(out)
        out.append(text[end.start() : end.end()])
        position = end.end()
    return "".join(out) + text[position:] if out else text


def _assignments(text: str) -> str:
    out: list[str] = []
    copied = 0
    for match in _ASSIGNED.finditer(text):
        # A match inside a value already masked is part of that value.
        if match.start() < copied:
            continue
        name, separator = match.group(1), match.group(2)
        if separator is None and not name.startswith("-"):
            continue
        if not secret_name(name):
            continue
        value = _VALUE.match(text, match.end())
        if value is None or value.group(0).strip("'\"") in _ALREADY_MASKED:
            continue
        quote = value.group(0)[:1] if value.group(0)[:1] in "'\"" else ""
        closed = quote and len(value.group(0)) > 1 and value.group(0).endswith(quote)
        out += [text[copied : value.start()], quote + MASK + (quote if closed else "")]
        copied = value.end()
    return "".join(out) + text[copied:] if out else text


# A str field that holds a pod's or a provider's words: redacted wherever it is validated (a
# probe's answer parsed, a saved report read, a model built).
Redacted = Annotated[str, AfterValidator(redact)]
