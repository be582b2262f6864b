"""The probe assembled: its parts (computefence/probe/) joined into the one script that travels,
with its parameters embedded. It runs here, on the client, with any Python ComputeFence runs
on; it is no part: PARTS and WATCH_PARTS never name it, so it is never joined into the script."""

from __future__ import annotations

import functools
import json
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any

# The parts of the probe `fleet check` and doctor send, in the order they are joined.
PARTS = (
    "core",
    "environment",
    "identity",
    "storage",
    "gpu",
    "packages",
    "torch",
    "perf",
    "accelerate",
    "dataset_counts",
    "dataset_rows",
    "dataset_arrow",
    "dataset",
    "custom",
    "model",
    "collectors",
)

# The watch probe (`fleet watch`): the parts it borrows (secret rules, identity, mount
# lookup), then its own, then its entry point.
WATCH_PARTS = (
    "core",
    "environment",
    "identity",
    "storage",
    "watch_gpu",
    "watch_jobs",
    "watch_files",
    "watch",
)

_PARAMS_LINE = 'EMBEDDED_PARAMS = "{}"\n'

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
    return head + _compressed_params(_params_line(params)) + tail


def _params_line(params: dict[str, Any]) -> str:
    return "EMBEDDED_PARAMS = %s\n" % repr(json.dumps(params, sort_keys=True))


# A fleet's pods get the same parameters but for a deadline rounded to 0.1 s: a few dozen
# lines in a run, each compressed once (~15 us a pod).
@functools.lru_cache(maxsize=256)
def _compressed_params(line: str) -> bytes:
    return zlib.compress(line.encode("utf-8"), 9)


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
