"""`computefence dataset dedupe`: cleaned copies the check then finds clean."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from dataset_helpers import csv_text, jsonl_text, reference, scan, write
from hypothesis import given, settings
from hypothesis import strategies as st

from computefence.dataset_tools import dedupe
from computefence.errors import ConfigError

ROWS = [
    {"text": "good film", "label": "pos"},
    {"label": "pos", "text": " good film "},
    {"text": "bad film", "label": "neg"},
    {"text": "bad film", "label": "pos"},
    {"text": "bad film", "label": "pos"},
    {"text": None, "label": "neg"},
    {"text": "fine", "label": "neu", "source": "a"},
    {"text": "fine", "label": "neu", "source": "b"},
]


def _files(tmp_path: Path) -> dict[str, Path]:
    cells = [[r.get("text") or "", r["label"]] for r in ROWS]
    return {
        "jsonl": write(tmp_path / "train.jsonl", jsonl_text(ROWS)),
        "jsonl.gz": write(tmp_path / "train.jsonl.gz", jsonl_text(ROWS), gz=True),
        "json": write(tmp_path / "train.json", json.dumps(ROWS, indent=2)),
        "csv": write(tmp_path / "train.csv", csv_text(["text", "label"], cells)),
        "tsv.gz": write(tmp_path / "train.tsv.gz", csv_text(["text", "label"], cells, "\t"), gz=True),
    }


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "json", "csv", "tsv.gz"])
def test_dedupe_round_trip_in_the_same_format(tmp_path, kind):
    source = _files(tmp_path)[kind]
    out = tmp_path / f"out.{kind}"
    result = dedupe(str(source), str(out))
    before, after = scan(source), scan(out)
    assert after["format"] == before["format"] and after["compression"] == before["compression"]
    assert after["duplicate_rows"] == 0 and after["rows"] == before["rows"] - before["duplicate_rows"]
    assert result.rows_read == before["rows"] and result.rows_written == after["rows"]
    assert result.duplicate_rows_dropped == before["duplicate_rows"]
    assert after["conflicting_inputs"] == before["conflicting_inputs"] == 1

    cleaner = tmp_path / f"clean.{kind}"
    result = dedupe(str(source), str(cleaner), drop_conflicts=True, drop_missing=True)
    final = scan(cleaner)
    assert final["conflicting_inputs"] == 0 and final["duplicate_rows"] == 0
    assert final["missing_inputs"] == 0 and final["missing_labels"] == 0
    assert (
        result.conflicting_inputs == 1 and result.conflict_rows_dropped == 2
    )  # 'bad film' neg + pos (its repeat is a duplicate)


def test_jsonl_lines_are_copied_byte_for_byte_first_occurrence_kept(tmp_path):
    text = '{"b": 1, "a": "x"}\r\n{"a": "x", "b": 1}\n{"a": "y"}\n{broken\n{"a": "x",  "b": 1}'
    source = write(tmp_path / "in.jsonl", text)
    result = dedupe(str(source), str(tmp_path / "out.jsonl"))
    assert (tmp_path / "out.jsonl").read_bytes() == b'{"b": 1, "a": "x"}\r\n{"a": "y"}\n'
    assert result.unreadable_rows_skipped == 1 and result.duplicate_rows_dropped == 2


def test_csv_records_keep_their_quoting_and_gzip_stays_gzip(tmp_path):
    text = 'text,label\r\n"multi\nline, quoted",1\r\nplain,0\r\n"multi\nline, quoted",1\r\n'
    source = write(tmp_path / "in.csv.gz", text, gz=True)
    dedupe(str(source), str(tmp_path / "out.csv.gz"))
    assert (
        gzip.decompress((tmp_path / "out.csv.gz").read_bytes()).decode()
        == 'text,label\r\n"multi\nline, quoted",1\r\nplain,0\r\n'
    )


def test_by_input_keeps_one_row_per_input(tmp_path):
    source = _files(tmp_path)["jsonl"]
    result = dedupe(str(source), str(tmp_path / "out.jsonl"), by_input=True)
    after = scan(tmp_path / "out.jsonl")
    assert after["duplicate_inputs"] == 0 and result.repeated_input_rows_dropped == 2  # 'bad film' pos, 'fine' b


def test_refusals_are_one_line_config_errors(tmp_path):
    source = _files(tmp_path)["jsonl"]
    with pytest.raises(ConfigError, match="different file"):
        dedupe(str(source), str(source))
    with pytest.raises(ConfigError, match="does not exist"):
        dedupe(str(source), str(tmp_path / "no" / "out.jsonl"))
    with pytest.raises(ConfigError, match="cannot read .*does not exist"):
        dedupe(str(tmp_path / "missing.jsonl"), str(tmp_path / "out.jsonl"))
    with pytest.raises(ConfigError, match="no column 'prompt'; its columns: text, label, source"):
        dedupe(str(source), str(tmp_path / "out.jsonl"), input_column="prompt", drop_conflicts=True)
    assert not (tmp_path / "out.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


ROW = st.fixed_dictionaries(
    {"text": st.sampled_from(["a", " a", "b", "c", "", None])},
    optional={"label": st.sampled_from(["x", "y", " x", 0, 1, None]), "meta": st.sampled_from([1, "m", [1]])},
)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(ROW, max_size=30), drop_conflicts=st.booleans())
def test_dedupe_then_check_finds_no_duplicates(rows, drop_conflicts):
    expected = reference(rows, "text", "label")
    with tempfile.TemporaryDirectory() as tmp:
        source = write(Path(tmp) / "in.jsonl", jsonl_text(rows))
        out = Path(tmp) / "out.jsonl"
        if not rows:
            with pytest.raises(ConfigError, match="has no rows"):
                dedupe(str(source), str(out), "text", "label")
            return
        if expected["absent_columns"]:
            with pytest.raises(ConfigError, match="has no column 'label'"):
                dedupe(str(source), str(out), "text", "label", drop_conflicts=drop_conflicts)
            return
        result = dedupe(str(source), str(out), "text", "label", drop_conflicts=drop_conflicts)
        after = scan(out, "text", "label")
    assert after["duplicate_rows"] == 0
    assert result.duplicate_rows_dropped == expected["duplicate_rows"]
    if drop_conflicts:
        assert after["conflicting_inputs"] == 0 and result.conflicting_inputs == expected["conflicting_inputs"]
    else:
        assert after["rows"] == len(rows) - expected["duplicate_rows"]


def test_parquet_round_trip(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    source = tmp_path / "train.parquet"
    pq.write_table(pa.table({"text": [r["text"] for r in ROWS], "label": [r["label"] for r in ROWS]}), source)
    result = dedupe(str(source), str(tmp_path / "out.parquet"), drop_conflicts=True)
    after = scan(tmp_path / "out.parquet")
    assert after["format"] == "parquet" and after["duplicate_rows"] == 0 and after["conflicting_inputs"] == 0
    # Without the source column the two 'fine' rows are duplicates too.
    assert result.duplicate_rows_dropped == 3 and result.conflict_rows_dropped == 2
    assert [row["text"] for row in pq.read_table(tmp_path / "out.parquet").to_pylist()] == ["good film", None, "fine"]
