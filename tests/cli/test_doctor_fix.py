"""`computefence doctor --fix` on this machine: the same steps, prompt and outcomes as fleet
fix. Only a checkpoint folder under the test's own tmp_path is ever created."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from computefence.cli import main


@pytest.fixture
def place():
    """A folder on persistent local disk: under /tmp the check would send the fix to a volume instead."""
    folder = Path(tempfile.mkdtemp(prefix="computefence-doctor-fix-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder)


def _doctor(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["doctor", "--only", "storage.output-dir", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_doctor_fix_creates_the_missing_checkpoint_folder_and_proves_it(capsys, place):
    missing = place / "no" / "parent" / "ckpt"

    code, out, _ = _doctor(capsys, "--output-dir", str(missing), "--fix", "--yes", "--format", "json")

    document = json.loads(out)
    (host,) = document["hosts"]
    assert code == 0 and document["kind"] == "fix" and document["applied"] is True
    assert [(s["run"], s["status"], s["kind"]) for s in host["steps"]] == [(f"mkdir -p {missing}", "ran", "safe")]
    assert host["results"] == [
        {
            "check": "storage.output-dir",
            "subject": str(missing),
            "before": "block",
            "after": None,
            "outcome": "fixed",
            "reason": None,
            "output_tail": None,
        }
    ]
    assert missing.is_dir()


def test_doctor_fix_without_a_terminal_needs_yes_and_changes_nothing(capsys, place):
    missing = place / "no" / "parent" / "ckpt"

    code, _, err = _doctor(capsys, "--output-dir", str(missing), "--fix")

    assert code == 2 and "needs --yes" in err and not (place / "no").exists()


def test_yes_without_fix_is_a_usage_error(capsys, tmp_path):
    code, _, err = _doctor(capsys, "--output-dir", str(tmp_path), "--yes")
    assert code == 2 and "--yes needs --fix" in err
