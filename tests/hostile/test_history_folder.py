"""A --history folder is anyone's folder: files and directories with a run's name that are no
run (bad dates, 9999-12-31, a directory, someone's notes) are skipped with a warning, never
a traceback, and pruning deletes only what reads as a ComputeFence report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from computefence.cli import main

DEMO = Path(__file__).resolve().parents[2] / "computefence/demo/recordings/fleet"


def _run(history: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["fleet", "check", "--replay", str(DEMO), "--history", str(history), "--format", "json", *extra])
    _, err = capsys.readouterr()
    return code, err


@pytest.fixture
def report_text(tmp_path, capsys) -> str:
    assert main(["fleet", "check", "--replay", str(DEMO), "--format", "json", "-o", str(tmp_path / "r.json")]) == 1
    return (tmp_path / "r.json").read_text()


def _runs(history: Path) -> list[str]:
    """The folder's run files; every saved run also leaves its digest (`<run>.digest`) beside it."""
    names = {p.name for p in history.iterdir() if p.name != ".lock"}
    digests = {name for name in names if name.endswith(".digest")}
    assert {d.removesuffix(".digest") + ".json" for d in digests} <= names, "a digest outlived its run"
    return sorted(names - digests)


@pytest.mark.parametrize("name", ["20251399T999999Z.json", "00000000T000000Z.json"])
def test_an_entry_named_like_a_run_with_no_valid_time_is_skipped(name, report_text, tmp_path, capsys):
    history = tmp_path / "runs"
    history.mkdir()
    (history / name).write_text(report_text)
    code, err = _run(history, capsys)
    assert code == 1 and "Traceback" not in err
    assert f"computefence: warning: history: skipping {history / name}: its name is not a valid UTC time\n" in err
    assert len(_runs(history)) == 2  # the new run was saved beside it


def test_an_entry_dated_9999_does_not_stop_the_next_run_being_saved(report_text, tmp_path, capsys):
    history = tmp_path / "runs"
    history.mkdir()
    (history / "99991231T235959Z.json").write_text(report_text)
    code, err = _run(history, capsys)
    assert code == 1 and "Traceback" not in err
    assert len(_runs(history)) == 2


def test_a_directory_with_a_runs_name_is_skipped_and_never_pruned(tmp_path, capsys):
    history = tmp_path / "runs"
    (history / "20200101T000000Z.json").mkdir(parents=True)
    code, err = _run(history, capsys, "--keep", "1")
    assert code == 1 and "Traceback" not in err
    assert f"skipping {history / '20200101T000000Z.json'}: not a regular file\n" in err
    assert "20200101T000000Z.json" in _runs(history)


def test_pruning_deletes_only_files_that_read_as_reports(report_text, tmp_path, capsys):
    history = tmp_path / "runs"
    history.mkdir()
    notes = history / "20200101T000000Z.json"
    notes.write_text('{"my": "notes, not a run"}\n')
    (history / "20200102T000000Z.json").write_text(report_text)
    code, err = _run(history, capsys, "--keep", "1")
    assert code == 1 and "Traceback" not in err
    assert notes.read_text() == '{"my": "notes, not a run"}\n'  # kept
    assert f"computefence: warning: history: not deleting {notes} is not a computefence JSON report" in err
    assert err.count(f"not deleting {notes}") == 1  # one warning, not one per listing
    runs = _runs(history)
    assert "20200102T000000Z.json" not in runs and len(runs) == 2  # the old report went, the notes stayed
