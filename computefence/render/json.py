"""The machine-readable report: the Report model itself, schema_version included, and its
JSON Schema (`computefence schema`; a copy is kept in schema/report.schema.json).

`computefence report FILE.json` reads this back through models.Report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from computefence.models import SCHEMA_VERSION, Report

# The hosts list in Report.model_dump_json(indent=2) of a report without hosts. JSON strings
# hold no raw line break, so this text at this indent is only ever the top-level key.
_NO_HOSTS = '\n  "hosts": []'


def render(report: Report) -> str:
    return "".join(render_chunks(report))


def render_chunks(report: Report) -> Iterator[str]:
    """The same text as `render`, a host at a time: a thousand pods' report is never one string."""
    head, _, tail = report.model_copy(update={"hosts": []}).model_dump_json(indent=2).partition(_NO_HOSTS)
    yield head + '\n  "hosts": ['
    for index, host in enumerate(report.hosts):
        separator = "," if index else ""
        yield separator + "\n    " + host.model_dump_json(indent=2).replace("\n", "\n    ")
    yield ("\n  ]" if report.hosts else "]") + tail + "\n"


def report_schema() -> str:
    """The JSON Schema of what `render` writes (pydantic's serialization schema of Report)."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **Report.model_json_schema(mode="serialization"),
    }
    schema["title"] = f"ComputeFence report, schema_version {SCHEMA_VERSION}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
