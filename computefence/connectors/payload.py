"""The probe's two ends on the client: its parameters from a target's check options, and its
answer parsed into facts. The script itself is assembled by computefence.probe.assemble."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from computefence import jsontext
from computefence.errors import ProbeOutputError
from computefence.models import PROBE_SCHEMA_VERSION, CheckOptions, Facts
from computefence.probe.assemble import PROBES
from computefence.text import one_line

# Output beyond this is not a probe answer; it is a broken or hostile interpreter.
MAX_OUTPUT_BYTES = 8 * 1024 * 1024


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
