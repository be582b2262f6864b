"""The published JSON Schema of the report: `computefence schema` equals the checked-in
schema/report.schema.json, and real reports (the demo fleet, doctor, a dataset check)
validate against it with jsonschema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from computefence.cli import main
from computefence.demo import DEMO_RECORDING

CHECKED_IN = Path(__file__).resolve().parent.parent / "schema" / "report.schema.json"


def _cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_the_printed_schema_is_the_checked_in_one(capsys):
    code, printed = _cli(capsys, "schema")
    assert code == 0
    assert printed == CHECKED_IN.read_text(encoding="utf-8"), (
        "the report model changed: run `computefence schema > schema/report.schema.json` and commit it"
    )
    Draft202012Validator.check_schema(json.loads(printed))


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(CHECKED_IN.read_text(encoding="utf-8")))


def _valid(validator: Draft202012Validator, document: str) -> dict:
    report = json.loads(document)
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]
    return report


def test_the_demo_fleet_report_validates(capsys, validator):
    _, out = _cli(capsys, "fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "json")
    report = _valid(validator, out)
    assert {h["verdict"] for h in report["hosts"]} == {"ready", "blocked", "not_checked"}


def test_a_doctor_report_validates(capsys, validator, tmp_path):
    _, out = _cli(capsys, "doctor", "--format", "json", "--output-dir", str(tmp_path / "out"))
    report = _valid(validator, out)
    assert report["kind"] == "doctor" and report["summary"]["skipped"] >= 0


def test_a_dataset_report_validates(capsys, validator, tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"text": f"row {i % 7}", "label": i % 2}) + "\n" for i in range(40)))
    _, out = _cli(capsys, "dataset", "check", str(data), "--format", "json")
    report = _valid(validator, out)
    assert report["kind"] == "dataset" and any(f["fix_commands"] for f in report["hosts"][0]["findings"])


def test_the_schema_rejects_a_report_missing_what_it_requires(validator):
    assert list(validator.iter_errors({"schema_version": 2}))
