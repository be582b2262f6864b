"""`computefence dataset check|dedupe` in-process, and the probe carrying a dataset scan as it
runs on a pod (a separate interpreter, Python 3.8 included)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from dataset_helpers import jsonl_text, write

from computefence.connectors.local import probe_local
from computefence.connectors.payload import parse_probe_output, probe_params
from computefence.models import CheckOptions, Report
from computefence.probe.assemble import probe_payload

CLEAN = [{"text": f"sentence {i}", "label": "pos" if i % 2 else "neg"} for i in range(20)]
DIRTY = CLEAN + [CLEAN[0], {"text": "sentence 1", "label": "neg"}]


def test_check_exit_codes(tmp_path, cli):
    clean = write(tmp_path / "clean.jsonl", jsonl_text(CLEAN))
    dirty = write(tmp_path / "dirty.jsonl", jsonl_text(DIRTY))
    broken = write(tmp_path / "broken.jsonl", "not json\n" * 5)
    assert cli("dataset", "check", str(clean))[0] == 0
    code, out, _ = cli("dataset", "check", str(dirty))
    assert code == 0 and "dataset.duplicates" in out and "dedupe" in out
    assert cli("dataset", "check", str(dirty), "--fail-on", "warn")[0] == 1
    assert cli("dataset", "check", str(broken))[0] == 1
    assert cli("dataset", "check", str(tmp_path / "missing.csv"))[0] == 2  # a usage error here, not a finding
    assert cli("dataset", "check", str(clean), "--format", "yaml")[0] == 2
    assert cli("dataset", "check")[0] == 2


def test_check_json_carries_counts_as_numbers(tmp_path, cli):
    dirty = write(tmp_path / "dirty.jsonl", jsonl_text(DIRTY))
    code, out, _ = cli("dataset", "check", str(dirty), "--format", "json")
    document = json.loads(out)
    report = Report.model_validate(document)
    assert code == 0 and report.kind == "dataset"
    data = document["hosts"][0]["facts"]["dataset"]
    assert data["rows"] == 22 and data["duplicate_rows"] == 1 and data["conflicting_inputs"] == 1
    assert all(
        isinstance(data[k], int)
        for k in (
            "rows",
            "duplicate_rows",
            "duplicate_inputs",
            "conflicting_inputs",
            "missing_inputs",
            "missing_labels",
            "unreadable_rows",
        )
    )
    assert data["label_counts"] == {"neg": 12, "pos": 10}
    checks = {f["check"]: f["severity"] for f in document["hosts"][0]["findings"]}
    assert checks["dataset.duplicates"] == "warn" and checks["dataset.conflicting-labels"] == "warn"


def test_check_names_columns_and_budgets(tmp_path, cli):
    path = write(tmp_path / "train.jsonl", jsonl_text(CLEAN))
    code, out, _ = cli("dataset", "check", str(path), "--input-column", "prompt", "--format", "json")
    assert code == 1 and json.loads(out)["hosts"][0]["facts"]["dataset"]["absent_columns"] == ["prompt"]
    code, out, _ = cli("dataset", "check", str(path), "--max-rows", "5", "--format", "json")
    data = json.loads(out)["hosts"][0]["facts"]["dataset"]
    assert code == 0 and data["partial"] and data["rows"] == 5


def test_dedupe_command_prints_what_it_removed(tmp_path, cli):
    dirty = write(tmp_path / "dirty.jsonl", jsonl_text(DIRTY))
    out_path = tmp_path / "clean.jsonl"
    code, out, _ = cli("dataset", "dedupe", str(dirty), str(out_path), "--drop-conflicts")
    assert code == 0
    assert out == (
        f"wrote 19 of 22 rows to {out_path}; removed 1 duplicate row; 2 rows of 1 input with conflicting labels\n"
    )
    code, out, _ = cli("dataset", "dedupe", str(dirty), str(out_path), "--json")
    assert code == 0 and json.loads(out)["duplicate_rows_dropped"] == 1 and json.loads(out)["rows_written"] == 21
    assert cli("dataset", "check", str(out_path))[0] == 0


def test_dedupe_errors_are_one_line_with_exit_2(tmp_path, cli):
    code, out, err = cli("dataset", "dedupe", str(tmp_path / "missing.jsonl"), str(tmp_path / "out.jsonl"))
    assert code == 2 and out == ""
    assert err.startswith("computefence: error: cannot read") and err.count("\n") == 1


def _dataset_params(path: Path) -> dict:
    # A missing training interpreter keeps the torch and package collectors quick.
    return probe_params(CheckOptions(dataset=str(path)), python="/nonexistent/python3", deadline_s=20)


def test_the_probe_reports_the_scan_through_its_json_output(tmp_path):
    path = write(tmp_path / "train.jsonl.gz", jsonl_text(DIRTY), gz=True)
    facts = asyncio.run(probe_local(_dataset_params(path), timeout=120))
    assert facts.collectors["dataset"].ok
    data = facts.dataset
    assert data.rows == 22 and data.duplicate_rows == 1 and data.conflicting_inputs == 1 and data.compression == "gzip"


def _python38() -> str | None:
    """A working Python 3.8 (a pyenv shim named python3.8 may exist and not run)."""
    for candidate in (shutil.which("python3.8"), *sorted(Path("/root/.pyenv/versions").glob("3.8.*/bin/python3.8"))):
        if candidate is None:
            continue
        try:
            proc = subprocess.run(
                [str(candidate), "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError:
            continue
        if proc.stdout.strip() == "True":
            return str(candidate)
    return None


PY38 = _python38()


@pytest.mark.skipif(PY38 is None, reason="no Python 3.8 interpreter here")
def test_the_scan_runs_on_python_38(tmp_path):
    files = {
        "train.jsonl": jsonl_text(DIRTY),
        "train.csv": "text,label\n" + "".join(f'"{r["text"]}",{r["label"]}\n' for r in DIRTY),
        "train.json": json.dumps(DIRTY),
    }
    for name, text in files.items():
        path = write(tmp_path / name, text, gz=name.endswith(".csv"))
        proc = subprocess.run(
            [PY38, "-I", "-"], input=probe_payload(_dataset_params(path)).encode(), capture_output=True, timeout=120
        )
        data = parse_probe_output(proc.stdout).dataset
        assert (data.rows, data.duplicate_rows, data.conflicting_inputs) == (22, 1, 1), name
