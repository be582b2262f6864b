"""The probe as it travels: its source with parameters embedded, and its output parsed."""

from __future__ import annotations

import functools
import json
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

from pydantic import ValidationError

from computefence import jsontext
from computefence.errors import ProbeOutputError
from computefence.models import PROBE_SCHEMA_VERSION, CheckOptions, Facts
from computefence.probe import PARTS, WATCH_PARTS
from computefence.text import one_line

_PARAMS_LINE = 'EMBEDDED_PARAMS = "{}"\n'

# Output beyond this is not a probe answer; it is a broken or hostile interpreter.
MAX_OUTPUT_BYTES = 8 * 1024 * 1024


# A part's imports of earlier parts: `from .core import a, b` or the parenthesised form.
_PART_IMPORT = re.compile(r"^from \.(\w+) import (\([^)]*\)|[^\n(]*)\n", re.MULTILINE)


def _dataset_asked(params: Mapping[str, Any]) -> bool:
    # As the probe's runner decides whether to run the dataset collector (core.run).
    return bool(params.get("dataset"))


def _job_model_asked(params: Mapping[str, Any]) -> bool:
    # The policy's job names a model or a training config to read (probe part `model`).
    job = params.get("job_model")
    return isinstance(job, Mapping) and bool(job.get("ref") or job.get("from"))


# Parts sent only when the probe parameters need them: part -> the test of the parameters
# that says so. Every part not listed is always sent. A part left out must be one whose
# collector would find nothing to do with these parameters; only the script's last part (the
# entry point, which lists the collectors) may import from it, and gets None for its names
# (collectors.py leaves a None collector out).
PART_NEEDS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "dataset_counts": _dataset_asked,
    "dataset_rows": _dataset_asked,
    "dataset_arrow": _dataset_asked,
    "dataset": _dataset_asked,
    "model": _job_model_asked,
}


# Each probe a command can send: its parts, and the sections an answer must have (fail
# closed: `{}` validates as facts, every field has a default).
PROBES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "check": (PARTS, ("identity", "storage", "gpu")),
    "watch": (WATCH_PARTS, ("watch",)),
}


def probe_parts(params: Mapping[str, Any], parts: Sequence[str] = PARTS) -> tuple[str, ...]:
    """The parts of `parts` (in their order) that a probe run with `params` needs."""
    return tuple(name for name in parts if name not in PART_NEEDS or PART_NEEDS[name](params))


@functools.lru_cache(maxsize=8)
def probe_source(parts: tuple[str, ...] = PARTS) -> str:
    """The probe parts joined into one stdlib script, the same bytes on every build."""
    folder = resources.files("computefence.probe")
    pieces = []
    for name in parts:
        text = folder.joinpath(name + ".py").read_text(encoding="utf-8")
        text = _PART_IMPORT.sub(functools.partial(_joined_import, importer=name, parts=parts), text)
        pieces.append("# ---- computefence/probe/%s.py\n" % name + text)
    return "\n\n".join(pieces)


def _joined_import(found: re.Match[str], importer: str, parts: tuple[str, ...]) -> str:
    """What becomes of a part's `from .part import names` in the script: nothing when that
    part is in it (the names are the script's globals), else the names set to None."""
    source = found.group(1)
    if source in parts:
        return ""
    if importer != parts[-1]:
        raise RuntimeError(f"probe part {importer} imports from {source}, which this script leaves out")
    names = [name.strip() for name in found.group(2).strip("()").replace("\n", " ").split(",") if name.strip()]
    return "%s = None  # part %s not sent: these parameters do not need it\n" % (" = ".join(names), source)


def probe_params(checks: CheckOptions, python: str = "python3", **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "python": python,
        "output_dir": checks.output_dir,
        "accelerate_config": checks.accelerate_config,
        "dataset": checks.dataset,
        "input_column": checks.input_column,
        "label_column": checks.label_column,
        "extra_paths": list(checks.extra_paths),
        "perf": checks.perf,
    }
    params.update(extra)
    return params


def probe_payload(params: dict[str, Any], probe: str = "check") -> str:
    """The probe script (`probe`, of PROBES) with `params` embedded as a string literal
    (never shell-spliced), made of the parts these parameters need."""
    head, tail = _split_source(probe_parts(params, PROBES[probe][0]))
    return head + _params_line(params) + tail


# What a pod runs as `python3 -B -c BOOTSTRAP` with probe_wire(params) on stdin: it joins the
# zlib streams it is sent and runs them as the probe script. Stdlib only, writes nothing, and
# holds no single quote, so the command line can quote it for any POSIX shell.
BOOTSTRAP = (
    "import sys,zlib\n"
    "d=sys.stdin.buffer.read()\n"
    's=b""\n'
    "while d:\n"
    " o=zlib.decompressobj();s+=o.decompress(d);d=o.unused_data\n"
    ' if not o.eof:sys.exit("computefence: the probe arrived cut short")\n'
    'exec(compile(s,"computefence-probe","exec"),{"__name__":"__main__"})\n'
)


def probe_wire(params: dict[str, Any], probe: str = "check") -> bytes:
    """probe_payload(params) as it travels to BOOTSTRAP: three zlib streams, of which only the
    small middle one (the parameters) is compressed per pod; the script around it once per run
    and choice of parts."""
    head, tail = _compressed_source(probe_parts(params, PROBES[probe][0]))
    return head + zlib.compress(_params_line(params).encode("utf-8"), 9) + tail


def _params_line(params: dict[str, Any]) -> str:
    return "EMBEDDED_PARAMS = %s\n" % repr(json.dumps(params, sort_keys=True))


def _split_source(parts: tuple[str, ...]) -> tuple[str, str]:
    source = probe_source(parts)
    if _PARAMS_LINE not in source:
        raise RuntimeError("probe/core.py lost its EMBEDDED_PARAMS line")
    head, tail = source.split(_PARAMS_LINE, 1)
    return head, tail


@functools.lru_cache(maxsize=8)
def _compressed_source(parts: tuple[str, ...]) -> tuple[bytes, bytes]:
    head, tail = _split_source(parts)
    return zlib.compress(head.encode("utf-8"), 9), zlib.compress(tail.encode("utf-8"), 9)


def parse_probe_output(raw: bytes | str, probe: str = "check") -> Facts:
    """Facts from the probe's stdout, or ProbeOutputError with a one-line reason."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "replace")
    if len(raw) > MAX_OUTPUT_BYTES:
        raise ProbeOutputError(f"probe output is {len(raw)} bytes, over the {MAX_OUTPUT_BYTES}-byte cap")
    text = jsontext.utf8_text(raw).strip()
    if not text:
        raise ProbeOutputError("probe printed nothing")
    # Login banners or shell noise may precede the document; the probe's JSON is the last line.
    line = text.splitlines()[-1]
    if '"probe_error"' in line:
        try:
            document = json.loads(line)
        except ValueError:
            document = None
        if isinstance(document, dict) and "probe_error" in document:
            raise ProbeOutputError(f"probe failed: {one_line(str(document['probe_error']), 80)}")
    try:
        # Straight from the text into the models: no intermediate dicts, repeated strings shared.
        facts = Facts.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise ProbeOutputError(f"probe output is not JSON: {one_line(line, 80)}") from None
        if not first.get("loc"):
            raise ProbeOutputError(f"probe output is not a JSON object: {one_line(line, 80)}") from None
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ProbeOutputError(f"probe output does not match the facts schema at {where}: {first.get('msg')}") from None
    _require_probe_shape(facts, PROBES[probe][1])
    return facts


def _require_probe_shape(facts: Facts, required: tuple[str, ...]) -> None:
    """Fail closed: `{}` or any answer without the probe's stamp and its core sections is not
    a probe's answer, however well it validates (every field has a default)."""
    if "probe_schema_version" not in facts.model_fields_set:
        raise ProbeOutputError("probe output has no probe_schema_version: not the probe's answer")
    if facts.probe_schema_version != PROBE_SCHEMA_VERSION:
        raise ProbeOutputError(
            f"probe output has probe_schema_version {facts.probe_schema_version}, "
            f"this computefence sends version {PROBE_SCHEMA_VERSION}"
        )
    # Each required section is there, or the collector's own account of why not.
    missing = [name for name in required if name not in facts.model_fields_set and name not in facts.collectors]
    if missing:
        raise ProbeOutputError(
            f"probe output lacks the {', '.join(missing)} section{'s' if len(missing) > 1 else ''}: "
            "not the probe's answer"
        )
