"""The machine-readable report: the Report model itself, schema_version included, and its
JSON Schema (`computefence schema`; a copy is kept in schema/report.schema.json). The text
is computefence/saved_files.py's, which also reads a saved one back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from computefence.models import SCHEMA_VERSION, Changes, Report
from computefence.render.interface import Renderer
from computefence.saved_files import load_report, report_chunks, report_json

__all__ = ["JsonRenderer", "load_report", "render", "render_chunks", "report_schema"]

render = report_json
render_chunks = report_chunks


def report_schema() -> str:
    """The JSON Schema of what `render` writes (pydantic's serialization schema of Report)."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **Report.model_json_schema(mode="serialization"),
    }
    schema["title"] = f"ComputeFence report, schema_version {SCHEMA_VERSION}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


class JsonRenderer(Renderer):
    """`--format json`: the Report model itself, written a host at a time."""

    shows_changes = True

    def render(self, report: Report) -> str:
        return report_json(report)

    def render_chunks(self, report: Report) -> Iterator[str]:
        return report_chunks(report)

    def render_changes(self, changes: Changes) -> str:
        return changes.model_dump_json(indent=2) + "\n"
