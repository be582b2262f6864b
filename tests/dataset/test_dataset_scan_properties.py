"""The scan's counts equal a brute-force reference on generated data, in every format."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from dataset_helpers import counts_of, csv_text, jsonl_text, reference, scan, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Few distinct values, with whitespace variants, so duplicates, conflicts and missing values
# turn up in most examples.
TEXTS = st.sampled_from(["good", " good", "good ", "bad", "naïve café", "tab\there", "", "   ", "1"])
LABELS = st.sampled_from(["pos", "neg", " pos", "", 0, 1, [1, 2], None])
META = st.sampled_from(["m1", "m2", {"a": 1, "b": [1, " s "]}, {"b": [1, "s"], "a": 1}, None])
NONE = st.just(None)


@st.composite
def json_rows(draw):
    rows = []
    for _ in range(draw(st.integers(0, 40))):
        fields = {}
        for key, values in (("text", TEXTS | NONE), ("label", LABELS), ("meta", META)):
            if draw(st.booleans()) or (key == "text" and draw(st.booleans())):
                fields[key] = draw(values)
        order = draw(st.permutations(sorted(fields)))
        rows.append({key: fields[key] for key in order})
    return rows


def _json_file(directory: Path, rows: list[dict], fmt: str) -> Path:
    if fmt == "json-array":
        text = "[\n" + ",\n".join(json.dumps(row, indent=1) for row in rows) + "\n]\n"
        return write(directory / "train.json", text)
    return write(directory / f"train.{fmt}", jsonl_text(rows), gz=fmt.endswith(".gz"))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=json_rows(), fmt=st.sampled_from(["jsonl", "jsonl.gz", "json-array"]))
def test_json_counts_match_the_reference(rows, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        facts = scan(_json_file(Path(tmp), rows, fmt), "text", "label")
    assert facts["error"] is None and facts["unreadable_rows"] == 0
    assert counts_of(facts) == reference(rows, "text", "label")


CELLS = st.sampled_from(["a", "a ", " a", "b,c", 'say "hi"', "two\nlines", "é", "", " ", "1", "0"])


@st.composite
def csv_rows(draw):
    return [draw(st.lists(CELLS, min_size=1, max_size=3)) for _ in range(draw(st.integers(0, 40)))]


@settings(max_examples=80, deadline=None)
@given(rows=csv_rows(), delimiter=st.sampled_from([",", "\t"]))
def test_csv_counts_match_the_reference(rows, delimiter):
    header = ["text", "label", "source"]
    # A record of one blank cell is written as a blank line, which readers skip.
    rows = [cells for cells in rows if cells != [""]]
    with tempfile.TemporaryDirectory() as tmp:
        name = "train.csv" if delimiter == "," else "train.tsv"
        facts = scan(write(Path(tmp) / name, csv_text(header, rows, delimiter)))
    as_dicts = [dict(zip(header, cells)) for cells in rows]
    assert facts["error"] is None and facts["unreadable_rows"] == 0
    assert counts_of(facts) == reference(as_dicts, "text", "label", header)


NOISE = st.sampled_from(
    [
        b"\n",
        b"   \n",
        b"[1, 2]\n",
        b"42\n",
        b'"text"\n',
        b"null\n",
        b"{not json}\n",
        b'{"text": "cut',
        b'{"text": "\xff\xfe"}\n',
        b"1, 2\n",
        b'{"a": [1\n',
        b'2]}, {"b": 1}\n',
        b"],[\n",
        b'{"x": 1}],[{"y": 2}\n',
        b'\xef\xbb\xbf{"text": "bom"}\n',
        b"\x0c\n",
    ]
)


@st.composite
def jsonl_lines(draw):
    lines = []
    for row in draw(json_rows()):
        lines.append(json.dumps(row, ensure_ascii=draw(st.booleans())).encode() + b"\n")
        if draw(st.integers(0, 3)) == 0:
            lines.append(draw(NOISE))
    return b"".join(lines)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=jsonl_lines(), batch_bytes=st.sampled_from([64, 300, 65536]))
def test_lines_parsed_in_batches_count_exactly_as_one_at_a_time(monkeypatch, data, batch_bytes):
    from computefence.probe import dataset_rows

    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "train.jsonl", data)
        monkeypatch.setattr(dataset_rows, "_DS_BATCH_BYTES", 1)
        one_at_a_time = scan(path, "text", "label")
        monkeypatch.setattr(dataset_rows, "_DS_BATCH_BYTES", batch_bytes)
        batched = scan(path, "text", "label")
    for facts in (one_at_a_time, batched):
        facts.pop("duration_s")
    assert batched == one_at_a_time


def test_lines_that_would_merge_into_one_value_are_each_unreadable(tmp_path):
    # Joined with a comma these two lines would be two valid objects; each alone is not JSON.
    data = b'{"text": "a"}\n{"a": [{"x": 1}\n{"y": 2}]}, {"text": "b"}\n{"text": "c"}\n'
    facts = scan(write(tmp_path / "train.jsonl", data), "text", "label")
    assert (facts["rows"], facts["unreadable_rows"], facts["unreadable_lines"]) == (2, 2, [2, 3])
