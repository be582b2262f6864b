"""Cleaning a dataset: `computefence dataset dedupe`.

Reads the file with the probe's own reader (computefence.probe.dataset), so a row the
check calls a duplicate is exactly a row dedupe drops, and writes the kept rows in the input's
format (gzip preserved). JSON Lines and CSV/TSV records are copied byte for byte; JSON arrays
are rewritten element by element; Parquet is rewritten with pyarrow.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from computefence.errors import ConfigError
from computefence.probe.dataset import detect_dataset, run_dataset_scan


@dataclass
class DedupeResult:
    input_path: str
    output_path: str
    format: str
    compression: str | None
    rows_read: int
    rows_written: int
    duplicate_rows_dropped: int
    repeated_input_rows_dropped: int
    conflicting_inputs: int
    conflict_rows_dropped: int
    missing_rows_dropped: int
    unreadable_rows_skipped: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def dedupe(
    in_path: str,
    out_path: str,
    input_column: str | None = None,
    label_column: str | None = None,
    drop_conflicts: bool = False,
    *,
    drop_missing: bool = False,
    by_input: bool = False,
) -> DedupeResult:
    """Write the rows of `in_path` to `out_path` without exact duplicates (the first occurrence
    is kept) and without unreadable rows. Options: drop every row of an input that carries
    several labels (needs a first pass), drop rows lacking their input or label, keep only the
    first row of each input. Raises ConfigError with a one-line reason."""
    source = detect_dataset(in_path)
    if source["error"]:
        raise ConfigError(f"cannot read {in_path}: {source['error']}")
    fmt = source["format"]
    if fmt is None:
        raise ConfigError(f"{in_path} has no rows")
    _refuse_same_file(in_path, out_path)

    conflicts: set[int] = set()
    if drop_conflicts:
        first = run_dataset_scan(in_path, input_column, label_column, row_by_row=True)
        _check_scan(in_path, first.facts, drop_conflicts, drop_missing, by_input)
        conflicts = first.conflicting_input_fingerprints()

    sink = _Sink(out_path, fmt, source["compression"], conflicts, drop_missing, by_input)
    try:
        scan = run_dataset_scan(in_path, input_column, label_column, sink=sink)
        _check_scan(in_path, scan.facts, drop_conflicts, drop_missing, by_input)
        sink.commit(in_path)
    finally:
        sink.discard()
    facts = scan.facts
    return DedupeResult(
        input_path=in_path,
        output_path=out_path,
        format=fmt,
        compression=source["compression"],
        rows_read=facts["rows"],
        rows_written=sink.written,
        duplicate_rows_dropped=sink.dropped_duplicates,
        repeated_input_rows_dropped=sink.dropped_repeated_inputs,
        conflicting_inputs=len(conflicts),
        conflict_rows_dropped=sink.dropped_conflicts,
        missing_rows_dropped=sink.dropped_missing,
        unreadable_rows_skipped=facts["unreadable_rows"],
    )


def _refuse_same_file(in_path: str, out_path: str) -> None:
    src, dst = Path(in_path).expanduser(), Path(out_path).expanduser()
    if dst.exists() and dst.resolve() == src.resolve():
        raise ConfigError("OUT must be a different file from IN")
    if dst.is_dir():
        raise ConfigError(f"OUT {out_path} is a directory; name the file to write")
    if not dst.parent.is_dir():
        raise ConfigError(f"OUT {out_path}: directory {dst.parent} does not exist")


def _check_scan(path: str, facts: dict[str, Any], drop_conflicts: bool, drop_missing: bool, by_input: bool) -> None:
    if facts["error"]:
        raise ConfigError(f"cannot read {path}: {facts['error']}")
    if not facts["rows"] and not facts["unreadable_rows"]:
        raise ConfigError(f"{path} has no rows")
    if facts["partial"]:
        raise ConfigError(f"{path} was not read to the end: {facts['partial_reason']}")
    if facts["absent_columns"]:
        raise ConfigError(
            f"{path} has no column {', '.join(map(repr, facts['absent_columns']))}; "
            f"its columns: {', '.join(facts['columns']) or 'none'}"
        )
    needs_input = drop_conflicts or by_input
    if needs_input and facts["input_column"] is None:
        raise ConfigError(
            f"no input column named or recognised in {path} (columns: {', '.join(facts['columns'])}); "
            "pass --input-column"
        )
    if drop_conflicts and facts["label_column"] is None:
        raise ConfigError(
            f"no label column named or recognised in {path} (columns: {', '.join(facts['columns'])}); "
            "pass --label-column"
        )
    if drop_missing and facts["input_column"] is None and facts["label_column"] is None:
        raise ConfigError("--drop-missing needs an input or label column; pass --input-column or --label-column")


class _Sink:
    """Receives every readable row from the scan and writes the kept ones to a temporary file
    beside OUT, which replaces OUT only when the whole input was read."""

    def __init__(
        self, out_path: str, fmt: str, compression: str | None, conflicts: set[int], drop_missing: bool, by_input: bool
    ) -> None:
        self.out = Path(out_path).expanduser()
        self.fmt = fmt
        self.conflicts = conflicts
        self.drop_missing = drop_missing
        self.by_input = by_input
        self.written = self.dropped_duplicates = self.dropped_repeated_inputs = 0
        self.dropped_conflicts = self.dropped_missing = 0
        self.parquet_rows: list[int] = []
        # Inputs of rows written so far (--by-input keeps the first kept row of each input).
        self.kept_inputs: set[int] = set()
        self.tmp: str | None
        fd, self.tmp = tempfile.mkstemp(dir=self.out.parent, prefix=f".{self.out.name}.", suffix=".tmp")
        raw: IO[bytes] = os.fdopen(fd, "wb")
        self.handle: IO[bytes] | gzip.GzipFile = (
            gzip.GzipFile(fileobj=raw, mode="wb", filename="") if compression == "gzip" else raw
        )
        self.raw = raw

    # -- called by the scan

    def header(self, text: str) -> None:
        self.handle.write(text.encode("utf-8", "surrogateescape"))

    def row(self, raw: Any, duplicate: bool, input_fp: int | None, missing: bool) -> None:
        if duplicate:
            self.dropped_duplicates += 1
        elif input_fp is not None and input_fp in self.conflicts:
            self.dropped_conflicts += 1
        elif self.drop_missing and missing:
            self.dropped_missing += 1
        elif self.by_input and input_fp is not None and input_fp in self.kept_inputs:
            self.dropped_repeated_inputs += 1
        else:
            if self.by_input and input_fp is not None:
                self.kept_inputs.add(input_fp)
            self.written += 1
            self._write(raw)

    def _write(self, raw: Any) -> None:
        if self.fmt == "jsonl":
            self.handle.write(raw if raw.endswith(b"\n") else raw + b"\n")
        elif self.fmt in ("csv", "tsv"):
            self.handle.write(raw.encode("utf-8", "surrogateescape"))
        elif self.fmt == "json-array":
            self.handle.write(("[\n" if self.written == 1 else ",\n").encode() + raw.encode("utf-8", "surrogateescape"))
        else:  # parquet: row numbers, rewritten at the end
            self.parquet_rows.append(raw)

    # -- finishing

    def commit(self, in_path: str) -> None:
        if self.fmt == "json-array":
            self.handle.write(b"\n]\n" if self.written else b"[]\n")
        self.handle.close()
        self.raw.close()
        assert self.tmp is not None  # committed once
        if self.fmt == "parquet":
            _write_parquet(in_path, self.parquet_rows, self.tmp)
        os.chmod(self.tmp, 0o666 & ~_umask())
        os.replace(self.tmp, self.out)
        self.tmp = None

    def discard(self) -> None:
        if self.tmp is not None:
            try:
                self.handle.close()
                self.raw.close()
            finally:
                Path(self.tmp).unlink(missing_ok=True)
            self.tmp = None


def _write_parquet(in_path: str, rows: list[int], tmp: str) -> None:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("rewriting Parquet needs pyarrow: pip install pyarrow") from None
    table = pq.read_table(Path(in_path).expanduser())
    pq.write_table(table.take(rows), tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
