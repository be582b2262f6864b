"""Fail closed on the wrong saved file (#25, class 7): a baseline lock given where a report
is read, a report given as --baseline, or any other JSON, says what the file is and what was
expected, in one line with exit 2; it never prints READY, and never asks for an upgrade."""

from __future__ import annotations

import json

import pytest

from computefence.cli import main
from computefence.demo import DEMO_RECORDING

REPORT_WANTED = (
    "{path} is a baseline lock, not a ComputeFence report: "
    "save one with `computefence fleet check --format json -o FILE`"
)
LOCK_WANTED = (
    "{path} is a ComputeFence report, not a baseline lock: take one with `computefence fleet snapshot -o FILE`"
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    report, lock, other = folder / "report.json", folder / "lock.json", folder / "other.json"
    assert main(["fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "json", "-o", str(report)]) == 1
    assert main(["fleet", "snapshot", "--demo", "-o", str(lock)]) == 0
    other.write_text(json.dumps({"name": "not ours", "hosts": "three"}))
    return {"REPORT": str(report), "LOCK": str(lock), "OTHER": str(other)}


def _run(capsys, argv: list[str], saved: dict[str, str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([saved.get(word, word) for word in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "show", "LOCK"],
        ["report", "LOCK"],
        ["report", "show", "--format", "junit", "LOCK"],
        ["report", "diff", "LOCK", "REPORT"],
        ["report", "diff", "REPORT", "LOCK"],
        ["report", "merge", "REPORT", "LOCK"],
        ["fleet", "release", "--from", "LOCK"],
    ],
)
def test_a_lock_where_a_report_is_read_is_named_as_a_lock(saved, capsys, argv):
    code, out, err = _run(capsys, argv, saved)
    assert (code, out) == (2, "")
    assert err == f"computefence: error: {REPORT_WANTED.format(path=saved['LOCK'])}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["fleet", "check", "--replay", str(DEMO_RECORDING), "--baseline", "REPORT"],
        ["doctor", "--baseline", "REPORT"],
    ],
)
def test_a_report_given_as_baseline_is_named_as_a_report(saved, capsys, argv):
    code, out, err = _run(capsys, argv, saved)
    assert (code, out) == (2, "")
    assert err == f"computefence: error: {LOCK_WANTED.format(path=saved['REPORT'])}\n"


@pytest.mark.parametrize(
    "argv", [["report", "show", "OTHER"], ["fleet", "check", "--replay", str(DEMO_RECORDING), "--baseline", "OTHER"]]
)
def test_some_other_json_is_one_line_and_never_a_verdict(saved, capsys, argv):
    code, out, err = _run(capsys, argv, saved)
    assert (code, out) == (2, "")
    assert err.startswith(f"computefence: error: {saved['OTHER']} ") and err.count("\n") == 1
    assert "READY" not in err and "upgrade" not in err.lower()
