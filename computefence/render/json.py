"""The machine-readable report: the Report model itself, schema_version included.

`computefence report FILE.json` reads this back through models.Report.
"""

from __future__ import annotations

from pydantic_core import PydanticSerializationError

from computefence.models import Report


def render(report: Report) -> str:
    try:
        return report.model_dump_json(indent=2) + "\n"
    except PydanticSerializationError:
        # Lone surrogates (undecodable bytes from a pod, escaped as \udcXX) cannot be
        # written as UTF-8; show them as '?' rather than failing the whole report.
        data = _replace_surrogates(report.model_dump(mode="json"))
        return Report.model_validate(data).model_dump_json(indent=2) + "\n"


def _replace_surrogates(value):
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value
