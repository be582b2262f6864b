"""Helpers for the dataset tests: writing files, scanning them, and a brute-force reference
that implements the documented definitions directly."""

from __future__ import annotations

import csv
import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

from computefence.probe.dataset import run_dataset_scan

ABSENT = object()  # a key left out of a JSON row


def scan(path: Path | str, input_column: str | None = None, label_column: str | None = None, **kw) -> dict:
    return run_dataset_scan(str(path), input_column, label_column, **kw).facts


def jsonl_text(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write(path: Path, text: str | bytes, gz: bool = False) -> Path:
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def csv_text(header: list[str], rows: list[list[str]], delimiter: str = ",") -> str:
    import io

    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


# ---------------------------------------------------------------- the reference


def _norm(value):
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        return ("{}", tuple(sorted((k, _norm(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("[]", tuple(_norm(v) for v in value))
    return ("#", type(value).__name__, value)  # 1, 1.0, true and "1" all differ


def _present(value):
    if value is None or value is ABSENT:
        return None
    if isinstance(value, str) and not value.strip():
        return None
    return _norm(value)


def _name(value) -> str:
    """How the scan names a label in label_counts."""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(_thaw(value), ensure_ascii=False, sort_keys=True)


def _thaw(value):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "{}":
        return {k: _thaw(v) for k, v in value[1]}
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "[]":
        return [_thaw(v) for v in value[1]]
    if isinstance(value, tuple) and value[0] == "#":
        return value[2]
    return value


def reference(
    rows: list[dict], input_column: str | None, label_column: str | None, header: list[str] | None = None
) -> dict:
    """Counts by the definitions, for rows given as dicts: JSON rows, or CSV records as dicts
    of the cells present with the file's `header`."""
    seen_rows, seen_inputs = set(), set()
    labels_by_input: dict = defaultdict(set)
    counts = Counter()
    label_counts = Counter()
    for row in rows:
        key = _norm(row)
        counts["duplicate_rows"] += key in seen_rows
        seen_rows.add(key)
        value = _present(row.get(input_column, ABSENT)) if input_column else None
        label = _present(row.get(label_column, ABSENT)) if label_column else None
        if input_column and value is None:
            counts["missing_inputs"] += 1
        if label_column and label is None:
            counts["missing_labels"] += 1
        if label is not None:
            label_counts[_name(label)] += 1
        if value is not None:
            counts["duplicate_inputs"] += value in seen_inputs
            seen_inputs.add(value)
            if label is not None:
                labels_by_input[value].add(label)
    # A named column that no row has is reported as absent, not as missing everywhere.
    if header is not None:
        absent = [c for c in (input_column, label_column) if c and c not in header]
    else:
        absent = [c for c in (input_column, label_column) if c and rows and not any(c in row for row in rows)]
    for column, key in ((input_column, "missing_inputs"), (label_column, "missing_labels")):
        if column in absent:
            counts[key] = 0
    return {
        "absent_columns": absent,
        "rows": len(rows),
        "duplicate_rows": counts["duplicate_rows"],
        "duplicate_inputs": counts["duplicate_inputs"],
        "conflicting_inputs": sum(1 for labels in labels_by_input.values() if len(labels) > 1),
        "missing_inputs": counts["missing_inputs"],
        "missing_labels": counts["missing_labels"],
        "label_counts": dict(label_counts),
        "distinct_inputs": len(seen_inputs),
    }


def counts_of(facts: dict) -> dict:
    return {
        key: facts[key]
        for key in (
            "absent_columns",
            "rows",
            "duplicate_rows",
            "duplicate_inputs",
            "conflicting_inputs",
            "missing_inputs",
            "missing_labels",
            "label_counts",
            "distinct_inputs",
        )
    }
