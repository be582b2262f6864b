"""The machine-readable report: the Report model itself, schema_version included.

`computefence report FILE.json` reads this back through models.Report.
"""

from __future__ import annotations

from computefence.models import Report


def render(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"
