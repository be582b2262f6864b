"""The probe's dataset scan on every format and on the files that break training loaders."""

from __future__ import annotations

import bz2
import codecs
import gzip
import json

import pytest
from dataset_helpers import counts_of, csv_text, jsonl_text, reference, scan, write

from computefence.models import DatasetFacts
from computefence.probe import dataset as scanner
from computefence.probe import dataset_arrow, dataset_counts, dataset_rows

ROWS = [
    {"text": "good film", "label": "pos"},
    {"label": "pos", "text": " good film "},  # a duplicate after normalisation
    {"text": "bad film", "label": "neg"},
    {"text": "bad film", "label": "pos"},  # a conflicting label
    {"text": "bad film", "label": "pos"},  # and a duplicate of it
    {"text": None, "label": "neg"},
    {"text": "meh", "label": "  "},
    {"text": "fine", "label": "neu"},
]
EXPECTED = {
    "absent_columns": [],
    "rows": 8,
    "duplicate_rows": 2,
    "duplicate_inputs": 3,
    "conflicting_inputs": 1,
    "missing_inputs": 1,
    "missing_labels": 1,
    "label_counts": {"pos": 4, "neg": 2, "neu": 1},
    "distinct_inputs": 4,
}


def test_reference_agrees_with_the_hand_counted_expectation():
    assert reference(ROWS, "text", "label") == EXPECTED


@pytest.mark.parametrize(
    "name, gz", [("train.jsonl", False), ("train.json", False), ("train.jsonl.gz", True), ("train.data", True)]
)
def test_json_lines_plain_and_gzip_detected_by_magic(tmp_path, name, gz):
    facts = scan(write(tmp_path / name, jsonl_text(ROWS), gz=gz))
    assert facts["error"] is None
    assert facts["format"] == "jsonl" and facts["compression"] == ("gzip" if gz else None)
    assert counts_of(facts) == EXPECTED
    assert facts["columns"] == ["text", "label"]
    assert facts["input_column"] == "text" and facts["input_column_guessed"]
    assert facts["label_column"] == "label" and facts["label_column_guessed"]
    assert facts["conflict_examples"] == [{"input": "bad film", "labels": ["neg", "pos"], "lines": [3, 4, 5]}]
    DatasetFacts.model_validate(facts)


@pytest.mark.parametrize("gz", [False, True])
def test_json_array_streamed_across_small_chunks(tmp_path, monkeypatch, gz):
    monkeypatch.setattr(dataset_rows, "_DS_CHUNK", 16)  # elements straddle every chunk boundary
    text = "[\n" + ",\n".join(json.dumps(row, indent=2) for row in ROWS) + "\n]\n"
    facts = scan(write(tmp_path / "train.json", text, gz=gz))
    assert facts["error"] is None and facts["format"] == "json-array"
    assert counts_of(facts) == EXPECTED
    # Each element is pretty-printed over 4 lines, after the "[" line.
    assert facts["conflict_examples"][0]["lines"] == [10, 14, 18]


def test_json_array_problems(tmp_path):
    assert scan(write(tmp_path / "empty.json", "[ ]"))["rows"] == 0
    cut = scan(write(tmp_path / "cut.json", '[{"text": "a", "label": 1},\n{"text": "b", "lab'))
    assert cut["error_kind"] == "truncated" and cut["rows"] == 1 and cut["unreadable_lines"] == [2]
    unclosed = scan(write(tmp_path / "unclosed.json", '[{"text": "a", "label": 1}'))
    assert unclosed["error_kind"] == "truncated" and "no closing" in unclosed["error"]
    bad = scan(write(tmp_path / "bad.json", '[{"text": "a"},\n{"text": x},\n{"text": "c"}]'))
    assert bad["error_kind"] == "invalid_json" and bad["unreadable_lines"] == [2]
    mixed = scan(write(tmp_path / "mixed.json", '[{"text": "a"}, "just a string", 3]'))
    assert mixed["rows"] == 1 and mixed["unreadable_rows"] == 2 and mixed["error"] is None


def test_csv_with_quoted_newlines_and_delimiters(tmp_path):
    text = (
        "text,label\n"
        '"first line\nsecond line, with a comma",pos\n'
        "plain,neg\n"
        '"first line\nsecond line, with a comma" ,pos\n'
        '"""quoted"" word",neg\n'
        "plain,pos\n"
    )
    facts = scan(write(tmp_path / "train.csv", text))
    assert facts["format"] == "csv" and facts["columns"] == ["text", "label"]
    assert facts["rows"] == 5 and facts["duplicate_rows"] == 1 and facts["conflicting_inputs"] == 1
    # Rows start at lines 2, 4, 5, 7, 8: the quoted newline makes row 1 two lines long.
    assert facts["conflict_examples"] == [{"input": "plain", "labels": ["neg", "pos"], "lines": [4, 8]}]


@pytest.mark.parametrize("name", ["train.tsv", "train.txt", "train.csv"])
def test_tsv_by_suffix_or_content(tmp_path, name):
    text = csv_text(["sentence", "class"], [["a, b", "1"], ["a, b", "2"], ["c", "1"]], delimiter="\t")
    facts = scan(write(tmp_path / name, text))
    assert facts["format"] == "tsv"
    assert (facts["input_column"], facts["label_column"]) == ("sentence", "class")
    assert facts["conflicting_inputs"] == 1 and facts["label_counts"] == {"1": 2, "2": 1}


def test_semicolon_csv_is_sniffed(tmp_path):
    facts = scan(write(tmp_path / "export.csv", "text;label\nbonjour, monde;1\nsalut;0\nbonjour, monde;1\n"))
    assert facts["columns"] == ["text", "label"] and facts["duplicate_rows"] == 1


def test_csv_short_rows_are_missing_values_and_long_rows_unreadable(tmp_path):
    text = "text,label,source\na,1,x\nb\nc,,y\nd,1,x,extra\n"
    facts = scan(write(tmp_path / "train.csv", text))
    assert facts["rows"] == 3 and facts["missing_labels"] == 2 and facts["missing_inputs"] == 0
    assert facts["unreadable_rows"] == 1 and facts["unreadable_lines"] == [5]
    assert "4 cells, the header has 3" in facts["unreadable_reason"]


def test_unicode_and_byte_order_marks(tmp_path):
    rows = [
        {"text": "naïve café ☕", "label": "é"},
        {"text": "naïve café ☕", "label": "è"},
        {"text": "日本語", "label": "é"},
    ]
    jsonl = scan(write(tmp_path / "bom.jsonl", codecs.BOM_UTF8 + jsonl_text(rows).encode()))
    assert jsonl["error"] is None and jsonl["rows"] == 3 and jsonl["columns"] == ["text", "label"]
    assert jsonl["conflict_examples"][0]["input"] == "naïve café ☕"
    csv_facts = scan(write(tmp_path / "bom.csv", codecs.BOM_UTF8 + "text,label\nnaïve,é\nnaïve,è\n".encode()))
    assert csv_facts["columns"] == ["text", "label"] and csv_facts["conflicting_inputs"] == 1
    utf16 = scan(write(tmp_path / "excel.csv", "text,label\na,1\n".encode("utf-16")))
    assert utf16["error_kind"] == "utf16"


def test_bytes_that_are_not_utf8_make_their_rows_unreadable(tmp_path):
    jsonl = write(tmp_path / "latin1.jsonl", b'{"text": "ok"}\n{"text": "caf\xe9"}\n{"text": "ok2"}\n')
    facts = scan(jsonl)
    assert facts["rows"] == 2 and facts["unreadable_lines"] == [2] and "not UTF-8" in facts["unreadable_reason"]
    text = b"text,label\nok,1\ncaf\xe9,1\nok,1\n" + b"filler,0\n" * 3000 + b"na\xefve,0\nlast,1\n"
    facts = scan(write(tmp_path / "latin1.csv", text))
    assert facts["unreadable_lines"] == [3, 3005] and facts["rows"] == 3003 and facts["duplicate_rows"] == 3000


@pytest.mark.parametrize(
    "name, text, fmt",
    [
        ("really.csv", jsonl_text(ROWS), "jsonl"),
        ("really.jsonl", csv_text(["text", "label"], [["a", "1"], ["a", "1"]]), "csv"),
        ("really.parquet", jsonl_text(ROWS), "jsonl"),
        ("really.json", "[" + ",".join(json.dumps(r) for r in ROWS) + "]", "json-array"),
    ],
)
def test_content_decides_the_format_not_the_suffix(tmp_path, name, text, fmt):
    facts = scan(write(tmp_path / name, text))
    assert facts["format"] == fmt and facts["error"] is None and facts["duplicate_rows"] >= 1


@pytest.mark.parametrize(
    "value, kind", [("null", "null"), ("[1, 2]", "array"), ('"text"', "string"), ("3.5", "number"), ("true", "boolean")]
)
@pytest.mark.parametrize("batch_parses", [True, False])
def test_a_row_that_is_not_an_object_is_named_by_its_json_type(tmp_path, value, kind, batch_parses):
    # A line that is not JSON at all makes its batch be parsed line by line: both ways say the same.
    noise = "" if batch_parses else "not json\n"
    facts = scan(write(tmp_path / "train.jsonl", '{"text": "a"}\n' + value + "\n" + noise))
    assert facts["unreadable_lines"][0] == 2
    assert facts["unreadable_reason"] == "line 2: a JSON %s, not an object" % kind
    array_facts = scan(write(tmp_path / "train.json", '[{"text": "a"}, %s]' % value))
    assert "a JSON %s, not an object" % kind in array_facts["unreadable_reason"]


def test_truncated_last_line_is_one_unreadable_row(tmp_path):
    text = jsonl_text(ROWS) + '{"text": "cut here", "lab'
    facts = scan(write(tmp_path / "train.jsonl", text))
    assert facts["rows"] == 8 and facts["unreadable_rows"] == 1 and facts["unreadable_lines"] == [9]
    assert "cut off" in facts["unreadable_reason"] and facts["error"] is None


def test_truncated_gzip_is_an_error(tmp_path):
    data = gzip.compress(jsonl_text(ROWS * 200).encode())
    facts = scan(write(tmp_path / "train.jsonl.gz", data[: len(data) // 2]))
    assert facts["error_kind"] == "truncated" and facts["compression"] == "gzip"
    assert 0 < facts["rows"] < 1600


def test_rows_missing_their_columns(tmp_path):
    rows = [{"text": "a", "label": 1}, {"text": "b"}, {"label": 0}, {"other": 1}, {"text": "", "label": None}]
    facts = scan(write(tmp_path / "train.jsonl", jsonl_text(rows)))
    assert facts["missing_inputs"] == 3 and facts["missing_labels"] == 3 and facts["absent_columns"] == []
    assert facts["columns"] == ["text", "label", "other"]


def test_named_columns_absent_from_every_row(tmp_path):
    path = write(tmp_path / "train.jsonl", jsonl_text(ROWS))
    facts = scan(path, input_column="prompt", label_column="label")
    assert facts["absent_columns"] == ["prompt"] and facts["missing_inputs"] == 0
    assert facts["input_column"] == "prompt" and not facts["input_column_guessed"]
    assert facts["missing_labels"] == 1
    csv_facts = scan(write(tmp_path / "train.csv", "text,label\na,1\n"), label_column="Label")
    assert csv_facts["absent_columns"] == ["Label"] and csv_facts["columns"] == ["text", "label"]


def test_no_recognisable_columns_still_counts_duplicate_rows(tmp_path):
    rows = [{"messages": [{"role": "user", "content": "hi "}]}, {"messages": [{"content": "hi", "role": "user"}]}]
    facts = scan(write(tmp_path / "chat.jsonl", jsonl_text(rows)))
    assert facts["input_column"] is None and facts["label_column"] is None
    assert facts["duplicate_rows"] == 1 and facts["missing_inputs"] == 0 and facts["label_counts"] == {}


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_files(tmp_path, content):
    facts = scan(write(tmp_path / "train.jsonl", content))
    assert facts["exists"] and facts["error"] is None and facts["rows"] == 0 and facts["format"] == "jsonl"
    header_only = scan(write(tmp_path / "train.csv", "text,label\n"))
    assert header_only["rows"] == 0 and header_only["columns"] == ["text", "label"]


def test_huge_single_line_is_unreadable_and_the_rest_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset_rows, "_DS_LINE_CAP", 4096)
    huge = json.dumps({"text": "x" * 50000, "label": 1})
    text = jsonl_text(ROWS[:1]) + huge + "\n" + jsonl_text(ROWS[1:])
    facts = scan(write(tmp_path / "train.jsonl", text))
    assert facts["rows"] == 8 and facts["unreadable_lines"] == [2]
    assert "longer than" in facts["unreadable_reason"]
    assert counts_of(facts)["duplicate_rows"] == 2


def test_the_real_line_cap_is_64_mib():
    assert dataset_rows._DS_LINE_CAP == 64 * 1024 * 1024


def test_lines_that_are_not_objects(tmp_path):
    facts = scan(write(tmp_path / "train.jsonl", '{"text": "a"}\n[1, 2]\n"str"\n{bad json}\n\n{"text": "b"}\n'))
    assert facts["rows"] == 2 and facts["unreadable_lines"] == [2, 3, 4]
    pretty = scan(write(tmp_path / "doc.json", json.dumps({"data": [{"text": "a"}]}, indent=2)))
    assert pretty["rows"] == 0 and pretty["error_kind"] == "invalid_json"


@pytest.mark.parametrize(
    "name, data, kind",
    [
        ("train.jsonl.bz2", bz2.compress(b'{"text": "a"}\n'), "compressed"),
        ("train.bin", bytes(range(256)) * 4, "unknown_format"),
        ("cache.arrow", b"ARROW1\x00\x00" + bytes(100), "unknown_format"),
    ],
)
def test_files_that_are_not_datasets(tmp_path, name, data, kind):
    facts = scan(write(tmp_path / name, data))
    assert facts["error_kind"] == kind and facts["exists"]


def test_missing_path_and_directory(tmp_path):
    missing = scan(tmp_path / "nope.jsonl")
    assert missing["error_kind"] == "not_found" and not missing["exists"]
    assert scan(tmp_path)["error_kind"] == "not_a_file"


def test_parquet_without_pyarrow_says_so(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    facts = scan(write(tmp_path / "train.parquet", b"PAR1" + bytes(64) + b"PAR1"))
    assert facts["format"] == "parquet" and facts["error_kind"] == "needs_pyarrow"
    assert "parquet needs pyarrow on the pod" in facts["error"]


def test_parquet_with_pyarrow(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    facts = scan(path)
    assert facts["format"] == "parquet" and counts_of(facts) == EXPECTED


def test_label_types_and_nested_rows(tmp_path):
    rows = [
        {"text": "a", "labels": [1, 2]},
        {"text": "a", "labels": [1, 2]},
        {"text": "a", "labels": [2]},
        {"text": "b", "labels": [1, 2], "meta": {"x": 1, "y": " s"}},
        {"meta": {"y": "s", "x": 1}, "labels": [1, 2], "text": "b"},
    ]
    facts = scan(write(tmp_path / "train.jsonl", jsonl_text(rows)))
    assert facts["label_column"] == "labels"
    assert facts["label_counts"] == {"[1, 2]": 4, "[2]": 1}
    assert facts["duplicate_rows"] == 2 and facts["conflicting_inputs"] == 1
    assert facts["conflict_examples"][0]["labels"] == ["[1, 2]", "[2]"]


def test_conflict_examples_are_few_and_cut(tmp_path):
    long_text = "word " * 100
    rows = [{"text": f"{long_text}{i}", "label": label} for i in range(8) for label in ("a", "b")]
    facts = scan(write(tmp_path / "train.jsonl", jsonl_text(rows)))
    assert facts["conflicting_inputs"] == 8 and len(facts["conflict_examples"]) == 5
    assert all(len(ex["input"]) == 120 and ex["input"].endswith("...") for ex in facts["conflict_examples"])


def test_label_counts_keep_the_top_50_and_say_how_many(tmp_path, monkeypatch):
    rows = [{"text": str(i), "label": f"l{i % 60}"} for i in range(600)] + [{"text": "x", "label": "l0"}]
    facts = scan(write(tmp_path / "train.jsonl", jsonl_text(rows)))
    assert facts["distinct_labels"] == 60 and len(facts["label_counts"]) == 50
    assert facts["label_counts"]["l0"] == 11 and not facts["distinct_labels_capped"]
    for part in (dataset_counts, dataset_arrow):  # the stdlib path's limit, and the fast path's that follows it
        monkeypatch.setattr(part, "_DS_LABELS_TRACKED", 20)
    capped = scan(tmp_path / "train.jsonl")
    assert capped["distinct_labels_capped"] and capped["distinct_labels"] == 20
    assert capped["conflicting_inputs"] == 0 and capped["rows"] == 601


def test_row_and_time_budgets_give_a_partial_scan(tmp_path):
    path = write(tmp_path / "train.jsonl", jsonl_text([{"text": str(i), "label": i % 2} for i in range(10000)]))
    by_rows = scan(path, max_rows=10, row_by_row=True)
    assert by_rows["partial"] and by_rows["rows"] == 10 and "row budget of 10" in by_rows["partial_reason"]
    by_time = scan(path, max_seconds=1e-9, row_by_row=True)
    assert by_time["partial"] and by_time["rows"] == dataset_counts._DS_CHECK_EVERY
    # How far it got, of how much: the estimate comes from the first 64 KiB and the file size.
    assert 9000 <= by_time["estimated_rows"] <= 11000
    assert by_time["partial_reason"] == (
        f"stopped at the time budget after {dataset_counts._DS_CHECK_EVERY} rows of about {by_time['estimated_rows']}"
    )


def test_the_pyarrow_path_keeps_the_row_and_time_budgets(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    monkeypatch.setattr(dataset_arrow, "_DS_ARROW_READ", 4096)  # read in blocks of about 4 KiB of lines
    path = write(tmp_path / "train.jsonl", jsonl_text([{"text": str(i), "label": i % 2} for i in range(10000)]))
    by_rows = scan(path, max_rows=10)
    assert by_rows["engine"] == "pyarrow"
    assert by_rows == {
        **scan(path, max_rows=10, row_by_row=True),
        "engine": "pyarrow",
        "duration_s": by_rows["duration_s"],
    }
    by_time = scan(path, max_seconds=1e-9)
    assert by_time["engine"] == "pyarrow" and by_time["partial"] and 0 < by_time["rows"] < 10000
    assert by_time["partial_reason"] == (
        f"stopped at the time budget after {by_time['rows']} rows of about {by_time['estimated_rows']}"
    )
    # The counts are those of the rows read.
    assert by_time["missing_labels"] == 0 and sum(by_time["label_counts"].values()) == by_time["rows"]


def test_the_row_budget_follows_the_memory_available_on_the_pod(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal:       65536000 kB\nMemAvailable:    8000000 kB\n")
    available = scanner._ds_memory_available(str(proc))
    assert available == 8000000 * 1024
    # A quarter of 8,000,000 kB at 64 bytes a row.
    assert scanner._ds_row_budget({}, available) == 8000000 * 1024 // 4 // 64
    assert scanner._ds_row_budget({"dataset_max_rows": 10}, available) == 10
    (proc / "meminfo").write_text("MemTotal:       65536000 kB\n")
    assert scanner._ds_memory_available(str(proc)) is None
    assert scanner._ds_row_budget({}, None) == 20000000


def test_collect_dataset_keeps_within_the_collector_timeout(tmp_path):
    path = write(tmp_path / "train.jsonl", jsonl_text([{"text": str(i)} for i in range(10000)]))
    facts = scanner.collect_dataset({"dataset": str(path), "dataset_max_seconds": 600.0, "timeouts": {"dataset": 1e-9}})
    assert facts["partial"] and "time budget" in facts["partial_reason"]
    assert scanner.collect_dataset({"dataset": None}) is None


def test_table_growth_keeps_counts_exact():
    scan_ = dataset_counts._DatasetScan("synthetic", "text", "label", None, float("inf"))
    scan_.facts["input_column"], scan_.facts["label_column"] = "text", "label"
    n = 20000  # far beyond the initial 4096 slots
    rows = [(i + 1, hash(("row", i)), f"input {i}", str(i % 3), None) for i in range(n)]
    # 500 inputs again, each with another label, and 300 exact repeats of earlier rows.
    rows += [(n + i + 1, hash(("again", i)), f"input {i}", str((i + 1) % 3), None) for i in range(500)]
    rows += [rows[i] for i in range(1000, 1300)]
    scan_.consume(rows)
    facts = scan_.finish()
    assert scan_.size > 3 * 4096
    assert facts["rows"] == n + 800 and facts["distinct_inputs"] == n
    assert facts["duplicate_inputs"] == 800 and facts["conflicting_inputs"] == 500 and facts["duplicate_rows"] == 300


def test_values_whose_python_hashes_collide_stay_distinct(tmp_path):
    # hash(-1) == hash(-2), hash("") == hash(0) == hash(False), hash(5) == hash(2**61 + 4).
    rows = [
        {"x": -1},
        {"x": -2},
        {"x": ""},
        {"x": 0},
        {"x": False},
        {"x": 5},
        {"x": 2**61 + 4},
        {"x": 1},
        {"x": 1.0},
        {"x": True},
        {"x": "1"},
        {"x": None},
        {"x": [0]},
        {"x": [""]},
    ]
    facts = scan(write(tmp_path / "train.jsonl", jsonl_text(rows + rows[:3])))
    assert facts["rows"] == len(rows) + 3 and facts["duplicate_rows"] == 3
    labels = [{"text": str(i), "label": value} for i, value in enumerate([-1, -2, 0, False, 1, 1.0, True, "1"])]
    facts = scan(write(tmp_path / "labels.jsonl", jsonl_text(labels)))
    assert facts["label_counts"] == {"-1": 1, "-2": 1, "0": 1, "false": 1, "1": 2, "1.0": 1, "true": 1}
    assert facts["distinct_labels"] == 8 and facts["duplicate_rows"] == 0


def test_column_guesses_prefer_the_instruction_over_its_optional_input(tmp_path):
    rows = [
        {"instruction": "Add 2 and 2.", "input": "", "output": "4"},
        {"instruction": "Say hi.", "input": "", "output": "hi"},
    ]
    facts = scan(write(tmp_path / "alpaca.jsonl", jsonl_text(rows)))
    assert (facts["input_column"], facts["label_column"]) == ("instruction", None)
    assert facts["missing_inputs"] == 0 and facts["missing_labels"] == 0
