"""The dataset rules: pass, warn and block, with fixes that name the real path."""

from __future__ import annotations

import math

import pytest

from computefence import evaluate
from computefence.evaluate.context import build_context
from computefence.evaluate.dataset import check_dataset, entropy
from computefence.models import CheckOptions, CollectorStatus, DatasetFacts, Facts, LabelConflictExample, Severity

PATH = "/workspace/data/train.jsonl"
CLEAN = dict(
    path=PATH,
    exists=True,
    format="jsonl",
    columns=["text", "label"],
    input_column="text",
    label_column="label",
    input_column_guessed=True,
    label_column_guessed=True,
    rows=1000,
    distinct_inputs=1000,
    label_counts={"pos": 520, "neg": 480},
    distinct_labels=2,
)


def run(checks: CheckOptions | None = None, **fields) -> dict[str, object]:
    data = DatasetFacts(**{**CLEAN, **fields})
    facts = Facts(dataset=data)
    checks = checks or CheckOptions(dataset=data.path)
    return {f.check: f for f in check_dataset(facts, checks, build_context(facts, checks, None))}


def severities(findings: dict) -> dict[str, str]:
    return {check: f.severity.value for check, f in findings.items()}


def test_a_clean_dataset_passes_every_check_and_states_the_plateau():
    findings = run()
    assert severities(findings) == dict.fromkeys(
        (
            "dataset.unreadable",
            "dataset.columns",
            "dataset.duplicates",
            "dataset.conflicting-labels",
            "dataset.missing-values",
            "dataset.label-skew",
        ),
        "pass",
    )
    assert findings["dataset.unreadable"].message == f"1,000 rows of {PATH} read (jsonl)"
    assert (
        run(engine="pyarrow")["dataset.unreadable"].message
        == f"1,000 rows of {PATH} read (jsonl, counted with pyarrow)"
    )
    skew = findings["dataset.label-skew"].message
    assert f"H = -Σ p ln p = {entropy([520, 480]):.3f}" in skew and "ln 2 = 0.693" in skew
    assert "(recognised by name)" in findings["dataset.columns"].message


def test_the_rules_are_registered_with_the_evaluator():
    assert {"dataset.unreadable", "dataset.label-skew"} <= evaluate.CHECK_IDS
    facts = Facts(dataset=DatasetFacts(**CLEAN))
    checks = CheckOptions(dataset=PATH)
    assert {f.check for f in evaluate.evaluate_host(facts, checks)} >= {"dataset.duplicates", "dataset.columns"}


def test_entropy_is_the_cross_entropy_of_predicting_the_prior():
    assert entropy([50, 50]) == pytest.approx(math.log(2))
    assert entropy([1, 1, 1, 1]) == pytest.approx(math.log(4))
    assert entropy([90, 10]) == pytest.approx(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))
    assert entropy([7]) == 0.0


def test_duplicates_conflicts_and_missing_values_warn_with_dedupe_fixes():
    findings = run(
        duplicate_rows=50,
        duplicate_inputs=80,
        conflicting_inputs=3,
        missing_inputs=4,
        missing_labels=1,
        conflict_examples=[LabelConflictExample(input="great movie", labels=["pos", "neg"], lines=[3, 9])],
    )
    assert severities(findings)["dataset.duplicates"] == "warn"
    dup = findings["dataset.duplicates"]
    assert "50 of 1,000 rows (5.0%)" in dup.message and "80 rows repeat an earlier input" in dup.message
    assert dup.fix.commands == [f"computefence dataset dedupe {PATH} /workspace/data/train.dedup.jsonl"]
    assert "pip install computefence" in dup.fix.advice
    conflict = findings["dataset.conflicting-labels"]
    assert conflict.severity is Severity.WARN
    assert "3 of 1,000 distinct inputs carry more than one label" in conflict.message
    assert "'great movie' labelled pos, neg (lines 3, 9)" in conflict.message
    assert conflict.fix.commands == [
        f"computefence dataset dedupe {PATH} /workspace/data/train.dedup.jsonl --drop-conflicts"
    ]
    missing = findings["dataset.missing-values"]
    assert missing.severity is Severity.WARN and "4 rows (0.4%) without input 'text'" in missing.message
    assert "1 row (0.1%) without label" in missing.message and missing.fix.commands[0].endswith("--drop-missing")


def test_named_columns_appear_in_the_dedupe_fix_and_gzip_keeps_its_suffix():
    findings = run(
        path="/data/train.csv.gz",
        input_column="sentence",
        input_column_guessed=False,
        duplicate_rows=2,
        columns=["sentence", "label"],
    )
    assert findings["dataset.duplicates"].fix.commands == [
        "computefence dataset dedupe /data/train.csv.gz /data/train.dedup.csv.gz --input-column sentence"
    ]


def test_unreadable_rows_warn_below_one_percent_and_block_above():
    few = run(unreadable_rows=3, unreadable_lines=[7, 80, 91], unreadable_reason="line 7: not JSON: Expecting value")
    assert few["dataset.unreadable"].severity is Severity.WARN
    assert (
        "3 of 1,003 rows" in few["dataset.unreadable"].message
        and "lines 7, 80, 91" in few["dataset.unreadable"].message
    )
    many = run(unreadable_rows=40, unreadable_lines=[1, 2, 3], unreadable_reason="line 1: not UTF-8")
    block = many["dataset.unreadable"]
    assert block.severity is Severity.BLOCK and "(3.8%)" in block.message
    assert block.fix.commands == [f"sed -n '1p;2p;3p' {PATH} | cut -c1-300"]
    gz = run(path="/d/t.jsonl.gz", compression="gzip", unreadable_rows=40, unreadable_lines=[5])
    assert gz["dataset.unreadable"].fix.commands == ["zcat /d/t.jsonl.gz | sed -n '5p' | cut -c1-300"]


@pytest.mark.parametrize(
    "kind, extra, command",
    [
        ("not_found", {"exists": False}, "ls -la /workspace/data"),
        ("not_a_file", {}, f"ls -la {PATH}"),
        ("compressed", {"compression": "zstd"}, f"zstd -d {PATH}"),
        ("utf16", {}, f"iconv -f UTF-16 -t UTF-8 {PATH} > /workspace/data/train.utf8.jsonl"),
        ("needs_pyarrow", {"format": "parquet"}, "python3 -m pip install pyarrow"),
        ("truncated", {"compression": "gzip"}, f"gzip -t {PATH}"),
        ("unknown_format", {}, f"file {PATH}"),
    ],
)
def test_file_level_problems_block_alone(kind, extra, command):
    findings = run(error=f"something about {kind}", error_kind=kind, rows=0, **extra)
    assert list(findings) == ["dataset.unreadable"]
    finding = findings["dataset.unreadable"]
    assert finding.severity is Severity.BLOCK and finding.fix.commands == [command] and finding.subject == PATH


def test_an_empty_dataset_blocks():
    findings = run(rows=0, label_counts={}, distinct_labels=0, distinct_inputs=0)
    assert list(findings) == ["dataset.unreadable"] and "has no rows" in findings["dataset.unreadable"].message


def test_an_absent_column_blocks_and_lists_what_exists():
    findings = run(input_column="txt", input_column_guessed=False, absent_columns=["txt"], missing_inputs=0)
    columns = findings["dataset.columns"]
    assert columns.severity is Severity.BLOCK
    assert "no column 'txt'; its columns: text, label" in columns.message
    assert columns.fix.commands == [f"computefence dataset check {PATH} --input-column text"]
    # Checks that need the absent input are not run on it.
    assert "dataset.conflicting-labels" not in findings
    assert findings["dataset.missing-values"].severity is Severity.PASS


def test_no_recognisable_columns_is_said_not_blocked():
    findings = run(
        input_column=None,
        label_column=None,
        input_column_guessed=False,
        label_column_guessed=False,
        columns=["messages"],
        label_counts={},
        distinct_labels=0,
        distinct_inputs=0,
    )
    message = findings["dataset.columns"].message
    assert findings["dataset.columns"].severity is Severity.PASS
    assert "no input column named or recognised" in message and "not checked: duplicate inputs" in message
    assert set(findings) == {"dataset.unreadable", "dataset.columns", "dataset.duplicates"}


@pytest.mark.parametrize(
    "counts, expected",
    [
        ({"pos": 520, "neg": 480}, "pass"),
        ({"neg": 950, "pos": 50}, "warn"),  # majority 95%
        ({"a": 400, "b": 350, "c": 248, "d": 2}, "warn"),  # 'd' is 0.2% < 10% of 1/4
        ({"a": 340, "b": 330, "c": 330}, "pass"),
        ({"only": 1000}, "warn"),
    ],
)
def test_label_skew_thresholds(counts, expected):
    findings = run(label_counts=counts, distinct_labels=len(counts))
    skew = findings["dataset.label-skew"]
    assert skew.severity.value == expected
    if len(counts) > 1:
        assert f"{entropy(list(counts.values())):.3f} nats" in skew.message


def test_skew_fix_gives_inverse_frequency_weights():
    skew = run(label_counts={"1": 900, "0": 100}, distinct_labels=2)["dataset.label-skew"]
    assert "'1' holds 90.0%" in skew.message and "H = -Σ p ln p = 0.325 nats" in skew.message
    # w_c = N / (k n_c): class 0 -> 1000 / (2*100) = 5, class 1 -> 1000 / (2*900) = 0.556
    # Python for the training script is advice, never a shell command.
    assert skew.fix.commands == []
    assert "torch.nn.CrossEntropyLoss(weight=torch.tensor([5, 0.556]))" in skew.fix.advice
    assert "classes in the order 0, 1" in skew.fix.advice


def test_free_form_targets_are_not_checked_for_skew():
    many = {f"answer {i}": 10 for i in range(50)}
    findings = run(label_counts=many, distinct_labels=400)
    assert findings["dataset.label-skew"].severity is Severity.SKIP
    assert "400 distinct labels: a free-form target" in findings["dataset.label-skew"].message
    capped = run(label_counts=many, distinct_labels=10000, distinct_labels_capped=True)
    assert "more than 10,000 distinct labels" in capped["dataset.label-skew"].message


def test_partial_scans_warn_and_mark_every_message():
    findings = run(partial=True, partial_reason="stopped at the time budget after 4,096 rows", duplicate_rows=1)
    assert findings["dataset.unreadable"].severity is Severity.WARN
    assert findings["dataset.unreadable"].fix.commands == [f"computefence dataset check {PATH}"]
    assert "(partial scan: stopped at the time budget" in findings["dataset.duplicates"].message


def test_a_scan_that_did_not_run_warns_and_no_dataset_means_no_findings():
    facts = Facts(collectors={"dataset": CollectorStatus(ok=False, timed_out=True, error="timed out after 600.0s")})
    checks = CheckOptions(dataset=PATH)
    findings = check_dataset(facts, checks, build_context(facts, checks, None))
    assert [f.severity for f in findings] == [Severity.WARN]
    assert "was not scanned: timed out after 600.0s" in findings[0].message
    assert check_dataset(Facts(), CheckOptions(), build_context(Facts(), CheckOptions(), None)) == []


def test_paths_with_spaces_are_quoted_in_fixes():
    findings = run(path="/workspace/my data/train.jsonl", duplicate_rows=1)
    assert (
        "computefence dataset dedupe '/workspace/my data/train.jsonl' '/workspace/my data/train.dedup.jsonl'"
        in findings["dataset.duplicates"].fix.commands[0]
    )
