"""`computefence report FILE.json`: re-render a saved JSON report in any format."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError

from computefence import evaluate
from computefence.cli.app import app
from computefence.cli.output import OutputFormat, emit
from computefence.cli.policy import NoPolicyOpt, PolicyOpt, applied
from computefence.errors import ConfigError
from computefence.evaluate.fleet import summarize
from computefence.models import SCHEMA_VERSION, Report
from computefence.policy import resolve_policy


@app.command("report")
def report_command(
    path: Path = typer.Argument(..., metavar="FILE.json", help="A report saved with --format json."),
    fmt: OutputFormat = typer.Option("rich", "--format", "-f", help="Output format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="FILE", help="Write the report here (atomically) instead of stdout."),
    policy: PolicyOpt = None,
    no_policy: NoPolicyOpt = False,
) -> int:
    """Re-render a saved JSON report; exits with that run's exit status (0 or 1).

    With a policy (computefence.yaml found here, or --policy) its requirements, hardware and
    custom checks are judged again from the saved facts, with its severities and skips.
    """
    loaded = resolve_policy(policy, no_policy)
    report = load_report(path)
    if loaded is not None and (report.policy is None or report.policy.sha256 != loaded.sha256):
        hosts = [evaluate.reapply_policy(h, loaded.policy.for_target(h.name, h.tags)) for h in report.hosts]
        report = report.model_copy(update={
            "hosts": hosts, "policy": applied(loaded),
            "summary": summarize(hosts, report.sources, allow_unreachable=report.allow_unreachable)})
    emit(report, fmt.value, output)
    return evaluate.exit_code(report)


# A 1000-pod report with full facts is a few MiB; anything far larger is not one.
MAX_REPORT_BYTES = 256 * 2**20


def load_report(path: Path) -> Report:
    """A saved report, validated, or ConfigError naming the file and what is wrong."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise ConfigError(f"{path} is over {MAX_REPORT_BYTES // 2**20} MiB: not a computefence JSON report")
    try:
        report = Report.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        detail = f"{where}: {first['msg']}" if where else first["msg"]
        raise ConfigError(f"{path} is not a computefence JSON report ({' '.join(detail.split())})") from None
    if report.schema_version > SCHEMA_VERSION:
        raise ConfigError(
            f"{path} has schema_version {report.schema_version}; this computefence reads up to {SCHEMA_VERSION} (upgrade it)"
        )
    return report
