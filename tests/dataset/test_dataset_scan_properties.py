"""The scan's counts equal a brute-force reference on generated data, in every format."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_helpers import counts_of, csv_text, jsonl_text, reference, scan, write

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
            if draw(st.booleans()) or key == "text" and draw(st.booleans()):
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
