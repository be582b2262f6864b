"""`computefence dataset check|dedupe`: the dataset checks on this machine, and the cleaner
their fixes name."""

from __future__ import annotations

import json
import socket
import time

import typer

from computefence import dataset_tools, evaluate, jsontext
from computefence.cli.app import command_group
from computefence.cli.output import FailOn, FailOnOpt, FormatOpt, OutputFormat, ReportFileOpt, emit, write_stdout
from computefence.errors import ConfigError
from computefence.evaluate.checks.dataset import check_dataset
from computefence.evaluate.context import build_context
from computefence.models import CheckOptions, CollectorStatus, DatasetFacts, Facts, HostReport, HostStatus
from computefence.probe.dataset import run_dataset_scan

dataset_app = command_group(
    "dataset", "Check a training dataset for duplicates, conflicting labels, missing values and label skew; clean it."
)

_LOCAL_USAGE_ERRORS = ("not_found", "not_a_file", "unreadable_file")
_INPUT_HELP = "Column with the model input (default: recognised by name: text, prompt, instruction, sentence, ...)."
_LABEL_HELP = "Column with the label (default: recognised by name: label, labels, target, class, ...)."


@dataset_app.command("check")
def check(
    path: str = typer.Argument(..., metavar="PATH", help="JSON Lines, JSON array, CSV, TSV or Parquet; gzip allowed."),
    input_column: str | None = typer.Option(None, "--input-column", metavar="NAME", help=_INPUT_HELP),
    label_column: str | None = typer.Option(None, "--label-column", metavar="NAME", help=_LABEL_HELP),
    fmt: FormatOpt = OutputFormat("rich"),
    output: ReportFileOpt = None,
    fail_on: FailOnOpt = FailOn.block,
    max_rows: int | None = typer.Option(
        None, "--max-rows", min=1, metavar="N", help="Stop after N rows (a partial scan)."
    ),
    max_seconds: float | None = typer.Option(
        None, "--max-seconds", min=0.1, metavar="S", help="Stop after S seconds (a partial scan)."
    ),
) -> int:
    """Scan a dataset file on this machine, as the probe does on a pod.

    Exit status: 0 no blockers, 1 blockers (or warnings with --fail-on warn), 2 usage error.
    """
    started = time.monotonic()
    scan = run_dataset_scan(path, input_column, label_column, max_rows=max_rows, max_seconds=max_seconds)
    if scan.facts["error_kind"] in _LOCAL_USAGE_ERRORS:
        # A file on this machine that is not there is a usage error, not a finding with a pod's fix.
        raise ConfigError(scan.facts["error"])
    # Text read from the file may hold undecodable bytes (lone surrogates): gone in the round trip.
    data = DatasetFacts.model_validate(jsontext.loads(json.dumps(scan.facts)))
    facts = Facts(dataset=data, collectors={"dataset": CollectorStatus(duration_s=data.duration_s)})
    checks = CheckOptions(dataset=path, input_column=input_column, label_column=label_column)
    host = HostReport(
        name=socket.gethostname() or "localhost",
        status=HostStatus.OK,
        host="localhost",
        duration_s=round(time.monotonic() - started, 3),
        facts=facts,
        findings=check_dataset(facts, checks, build_context(facts, checks, None)),
    )
    report = evaluate.build_report([host], kind="dataset", fail_on=fail_on.severity)
    emit(report, fmt.value, output)
    return evaluate.exit_code(report)


@dataset_app.command("dedupe")
def dedupe(
    in_path: str = typer.Argument(..., metavar="IN", help="The dataset to clean."),
    out_path: str = typer.Argument(..., metavar="OUT", help="Where to write the cleaned copy (same format as IN)."),
    input_column: str | None = typer.Option(None, "--input-column", metavar="NAME", help=_INPUT_HELP),
    label_column: str | None = typer.Option(None, "--label-column", metavar="NAME", help=_LABEL_HELP),
    drop_conflicts: bool = typer.Option(
        False, "--drop-conflicts", help="Drop every row of an input that carries more than one label."
    ),
    drop_missing: bool = typer.Option(False, "--drop-missing", help="Drop rows without their input or label."),
    by_input: bool = typer.Option(
        False, "--by-input", help="Keep only the first row of each input, whatever its other fields."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> int:
    """Write a cleaned copy of IN: duplicate and unreadable rows removed.

    The first occurrence of a row is kept; options also remove inputs with conflicting
    labels, rows with missing values, or repeated inputs. OUT has IN's format (gzip kept).
    """
    result = dataset_tools.dedupe(
        in_path, out_path, input_column, label_column, drop_conflicts, drop_missing=drop_missing, by_input=by_input
    )
    if as_json:
        write_stdout(json.dumps(result.as_dict(), indent=2) + "\n")
        return 0
    inputs = f"{result.conflicting_inputs:,} {'input' if result.conflicting_inputs == 1 else 'inputs'}"
    dropped = [
        (result.duplicate_rows_dropped, "duplicate row{s}"),
        (result.repeated_input_rows_dropped, "row{s} repeating an earlier input"),
        (result.conflict_rows_dropped, f"row{{s}} of {inputs} with conflicting labels"),
        (result.missing_rows_dropped, "row{s} with a missing input or label"),
        (result.unreadable_rows_skipped, "unreadable row{s}"),
    ]
    removed = "; ".join(f"{count:,} {what.format(s='' if count == 1 else 's')}" for count, what in dropped if count)
    write_stdout(
        f"wrote {result.rows_written:,} of {result.rows_read + result.unreadable_rows_skipped:,} rows to "
        f"{result.output_path}; removed {removed or 'nothing'}\n"
    )
    return 0
