"""`computefence schema`: the JSON Schema of the `--format json` report."""

from __future__ import annotations

from computefence.cli.app import app
from computefence.cli.output import write_stdout
from computefence.render.json import report_schema


@app.command("schema")
def schema() -> int:
    """Print the JSON Schema of the report `--format json` writes (validate saved reports with it)."""
    write_stdout(report_schema())
    return 0
