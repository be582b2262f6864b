"""The machine-readable report: the Report model itself, schema_version included, and its
JSON Schema (`computefence schema`; a copy is kept in schema/report.schema.json).

`computefence report FILE.json` reads this back through models.Report.
"""

from __future__ import annotations

import json

from computefence.models import SCHEMA_VERSION, Report


def render(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"


def report_schema() -> str:
    """The JSON Schema of what `render` writes (pydantic's serialization schema of Report)."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **Report.model_json_schema(mode="serialization"),
    }
    schema["title"] = f"ComputeFence report, schema_version {SCHEMA_VERSION}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
