"""The machine-readable report: the Report model itself, schema_version included, and its
JSON Schema (`computefence schema`; a copy is kept in schema/report.schema.json).

`load_report` reads one back (`computefence report FILE.json`, `--history`, `policy init --from`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from computefence.files import read_config_bytes
from computefence.models import SCHEMA_VERSION, Changes, Report
from computefence.render.interface import Renderer
from computefence.saved_files import (
    REPORT,
    check_saved,
    kind_of,
    require_kind,
    top_level_keys,
    validation_error,
)

# A 1000-pod report with full facts is a few MiB; anything far larger is not one.
MAX_REPORT_BYTES = 256 * 2**20

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


def load_report(path: Path, model: type[Report] = Report) -> Report:
    """A saved report, validated, or ConfigError naming the file and what is wrong. `model`:
    a Report subclass that reads less of it (the history page drops the facts)."""
    raw = read_config_bytes(path, "computefence JSON report", limit=MAX_REPORT_BYTES)
    try:
        report = model.model_validate_json(raw)
    except ValidationError as exc:
        if kind_of(top_level_keys(raw)) not in (REPORT, None):
            require_kind(path, set(), raw, REPORT)
        raise validation_error(path, raw, exc, "a computefence JSON report") from None
    check_saved(path, report, raw, REPORT, report.schema_version, SCHEMA_VERSION)
    return report


class JsonRenderer(Renderer):
    """`--format json`: the Report model itself, written a host at a time."""

    shows_changes = True

    def render(self, report: Report) -> str:
        return render(report)

    def render_chunks(self, report: Report) -> Iterator[str]:
        return render_chunks(report)

    def render_changes(self, changes: Changes) -> str:
        return changes.model_dump_json(indent=2) + "\n"
