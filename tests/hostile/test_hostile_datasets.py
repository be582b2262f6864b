"""A dataset built to break the scan (rows nested 100,000 deep, a FIFO, a missing file), on the
laptop with `dataset check` and on a pod through the probe: one unreadable row counted, or one
line and exit 2, never a traceback or a hang."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from computefence.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "probe"))
from probe_pod import Pod

DEEP = "[" * 100_000 + "]" * 100_000
ROWS = (
    '{"text": "a", "label": 1}\n'
    f'{{"text": {DEEP}, "label": 2}}\n'
    '{"text": ' + "[" * 990 + "]" * 990 + ', "label": 3}\n'
    '{"text": "b", "label": 4}\n'
)


def test_dataset_check_counts_deep_rows_as_unreadable_and_reads_on(tmp_path, capsys):
    path = tmp_path / "train.jsonl"
    path.write_text(ROWS)
    assert main(["dataset", "check", str(path), "--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert '"rows": 2' in out and '"unreadable_rows": 2' in out
    assert "line 2: nested too deep to read" in out


def test_doctor_on_a_pod_counts_the_deep_row_and_fails_the_dataset_check(tmp_path):
    pod = Pod(tmp_path / "pod")
    data = pod.root / "workspace" / "train.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(ROWS)
    facts = pod.run(dataset=str(data)).facts
    assert facts.collectors["dataset"].ok
    assert (facts.dataset.rows, facts.dataset.unreadable_rows) == (2, 2)
    assert facts.dataset.partial_reason is None  # the scan went on to the end


def test_a_deep_element_in_a_json_array_stops_the_scan_with_a_reason(tmp_path, capsys):
    path = tmp_path / "train.json"
    path.write_text(f'[{{"text": "a", "label": 1}}, {{"text": {DEEP}}}]')
    assert main(["dataset", "check", str(path), "--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "nested too deep to read" in out


def test_dataset_check_of_a_missing_file_is_one_line_exit_2(capsys):
    assert main(["dataset", "check", "/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert err == "computefence: error: /nonexistent does not exist\n"


def test_dataset_check_of_a_fifo_does_not_block(tmp_path, capsys):
    fifo = tmp_path / "train.jsonl"
    os.mkfifo(fifo)
    result = {}
    worker = threading.Thread(target=lambda: result.update(code=main(["dataset", "check", str(fifo)])), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():
        with open(fifo, "wb"):
            pass
        pytest.fail("dataset check blocked on a FIFO")
    assert result["code"] == 2
    assert "is not a regular file" in capsys.readouterr().err
