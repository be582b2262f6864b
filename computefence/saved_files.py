"""What a saved JSON file is, for commands that read one back (`report show/diff/merge`,
`--baseline`, `--history`): a ComputeFence report and a baseline lock both validate as the
other's model (their fields have defaults), so the keys a file was written with decide.

A file of the wrong kind is a ConfigError saying what it is and what was expected, before
any schema_version check: a lock read as a report never prints READY, and a report read as
a lock never asks to upgrade ComputeFence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from computefence.errors import ConfigError
from computefence.files import read_config_bytes
from computefence.models import SCHEMA_VERSION, Report
from computefence.text import one_line

Saved = TypeVar("Saved", bound=BaseModel)

REPORT = "a ComputeFence report"
LOCK = "a baseline lock"
# Keys every file of the kind has, as ComputeFence writes it.
_KEYS = {REPORT: ("hosts",), LOCK: ("fingerprint",)}
_HOW = {
    REPORT: "save one with `computefence fleet check --format json -o FILE`",
    LOCK: "take one with `computefence fleet snapshot -o FILE`",
}


def kind_of(fields: Sequence[str] | set[str]) -> str | None:
    """REPORT or LOCK by the top-level keys of a document; None for neither."""
    for kind, keys in _KEYS.items():
        if all(key in fields for key in keys):
            return kind
    return None


def top_level_keys(raw: bytes) -> set[str]:
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return set()
    return set(document) if isinstance(document, dict) else set()


def require_kind(path: Path, fields: set[str], raw: bytes, expected: str) -> None:
    """ConfigError unless the document `raw` (whose validated model set `fields`) was written as `expected`."""
    if kind_of(fields) == expected:
        return
    actual = kind_of(top_level_keys(raw))
    what = f"is {actual}" if actual else "is not a file ComputeFence wrote"
    raise ConfigError(f"{path} {what}, not {expected}: {_HOW[expected]}")


# JSON's tokens: a string, a punctuation mark, or a bare word (number, true, false, null).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
# A path given twice (a key repeated in one object): no line is the offending one.
_AMBIGUOUS = 0


def _value_lines(text: str, parts: Sequence[Any]) -> dict[tuple[Any, ...], int]:
    """Path (keys and list indexes, as pydantic's loc) -> the line its key or list item starts on,
    for the paths along `parts` only (an error's loc): one pass, whatever the file's size."""
    wanted = set(parts)
    lines: dict[tuple[Any, ...], int] = {}
    # One frame per open container: [path, next index (list) or current key (object), awaiting a key].
    stack: list[list[Any]] = []
    line, last = 1, 0
    for match in _JSON_TOKEN.finditer(text):
        token, start = match.group(), match.start()
        line += text.count("\n", last, start)
        last = start
        top = stack[-1] if stack else None
        if token in "}]":
            if stack:
                stack.pop()
            continue
        if token == ",":
            if top is not None:
                if isinstance(top[1], int):
                    top[1] += 1
                else:
                    top[2] = True
            continue
        if token == ":":
            continue
        if top is not None and top[2]:  # an object's key
            try:
                key = json.loads(token)
            except ValueError:
                return lines
            top[1], top[2] = key, False
            path = (*top[0], key)
            if key in wanted and (not top[0] or top[0] in lines):
                lines[path] = _AMBIGUOUS if path in lines else line
            continue
        path = () if top is None else (*top[0], top[1])
        if top is not None and isinstance(top[1], int) and top[1] in wanted and (not top[0] or top[0] in lines):
            lines.setdefault(path, line)
        if token == "{":
            stack.append([path, None, True])
        elif token == "[":
            stack.append([path, 0, False])
    return lines


def _line_of(raw: bytes, loc: Sequence[Any]) -> int | None:
    """The line of the key or list item an error is at (for a missing key, of the object that
    lacks it); None where the document gives no one line for it (a key repeated in one object)."""
    lines = _value_lines(raw.decode("utf-8", "replace"), loc)
    found: int | None = None
    path: tuple[Any, ...] = ()
    for part in loc:
        if (*path, part) in lines:  # other parts (a union member's name) are not in the document
            path = (*path, part)
            found = lines[path]
            if found == _AMBIGUOUS:
                return None
    return found or None


def _bare_constant_line(raw: bytes) -> int | None:
    """The line of a NaN or Infinity outside strings: JSON has no such number."""
    text = raw.decode("utf-8", "replace")
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)', text):
        if match.group(1):
            return text.count("\n", 0, match.start()) + 1
    return None


def validation_error(path: Path, raw: bytes, exc: ValidationError, expected: str) -> ConfigError:
    """FILE:LINE: where: what, for the first error of a saved file."""
    first = exc.errors()[0]
    loc = first.get("loc", ())
    where = ".".join(str(p) for p in loc)
    if first["type"] == "finite_number":
        line = _bare_constant_line(raw) or _line_of(raw, loc)
    elif first["type"] == "json_invalid":
        line = None
    else:
        line = _line_of(raw, loc)
    detail = one_line(f"{where}: {first['msg']}" if where else first["msg"], 200)
    if line and raw.count(b"\n") > 1:  # a line number says nothing in a one-line file
        return ConfigError(f"{path}:{line}: not {expected} ({detail})")
    return ConfigError(f"{path} is not {expected} ({detail})")


def validated(path: Path, raw: bytes, model: type[Saved], kind: str, what: str) -> Saved:
    """`raw` (the file at `path`) as `model`; a file of another kind says what it is, a bad
    one FILE:LINE and what is wrong (`what`: "a computefence JSON report")."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if kind_of(top_level_keys(raw)) not in (kind, None):
            require_kind(path, set(), raw, kind)
        raise validation_error(path, raw, exc, what) from None


def check_saved(path: Path, model: BaseModel, raw: bytes, expected: str, found: int, known: int) -> None:
    """The file is of the `expected` kind and of a schema_version this ComputeFence reads: a
    document of another kind says so; one of no known kind but a newer version asks for an upgrade."""
    if kind_of(model.model_fields_set) != expected and kind_of(top_level_keys(raw)) is None:
        check_schema_version(path, found, known)
    require_kind(path, model.model_fields_set, raw, expected)
    check_schema_version(path, found, known)


def check_schema_version(path: Path, found: int, known: int) -> None:
    """ConfigError for a schema_version this ComputeFence does not read; an absurd one is no upgrade."""
    if found <= known:
        return
    if found > 1000:
        raise ConfigError(f"{path}: its schema_version is not one any ComputeFence wrote")
    raise ConfigError(f"{path} has schema_version {found}; this computefence reads up to {known} (upgrade it)")


# ---------------------------------------------------------------- a saved report

# A 1000-pod report with full facts is a few MiB; anything far larger is not one.
MAX_REPORT_BYTES = 256 * 2**20

# The hosts list in Report.model_dump_json(indent=2) of a report without hosts. JSON strings
# hold no raw line break, so this text at this indent is only ever the top-level key.
_NO_HOSTS = '\n  "hosts": []'


def report_json(report: Report) -> str:
    """The report as `--format json` and `--history` write it."""
    return "".join(report_chunks(report))


def report_chunks(report: Report) -> Iterator[str]:
    """The same text as `report_json`, a host at a time: a thousand pods' report is never one string."""
    head, _, tail = report.model_copy(update={"hosts": []}).model_dump_json(indent=2).partition(_NO_HOSTS)
    yield head + '\n  "hosts": ['
    for index, host in enumerate(report.hosts):
        separator = "," if index else ""
        yield separator + "\n    " + host.model_dump_json(indent=2).replace("\n", "\n    ")
    yield ("\n  ]" if report.hosts else "]") + tail + "\n"


def load_report(path: Path, model: type[Report] = Report) -> Report:
    """A saved report, validated, or ConfigError naming the file and what is wrong. `model`:
    a Report subclass that reads less of it (the history page drops the facts)."""
    raw = read_config_bytes(path, "computefence JSON report", limit=MAX_REPORT_BYTES)
    report = validated(path, raw, model, REPORT, "a computefence JSON report")
    check_saved(path, report, raw, REPORT, report.schema_version, SCHEMA_VERSION)
    return report
