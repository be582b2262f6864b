"""The question before doctor --fix changes anything comes after the whole plan, in a real
terminal; with nothing to apply there is no question. Only folders under /var/tmp/… of the test
itself are created."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from terminal_session import ROOT, TerminalSession

DOCTOR = ("doctor", "--only", "storage.output-dir")


@pytest.fixture
def place():
    """Persistent local disk: under /tmp the check would send the fix to a volume instead."""
    folder = Path(tempfile.mkdtemp(prefix="computefence-fix-prompt-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder)


def test_doctor_fix_shows_each_command_before_the_question_and_runs_after_yes(place):
    missing = place / "runs" / "ckpt"
    session = TerminalSession(*DOCTOR, "--output-dir", str(missing), "--fix")

    before_question = session.read_until("[y/N]")
    assert not missing.exists()  # nothing ran while it asked
    plan = before_question[before_question.index("would run, in order:") :]
    assert f"mkdir -p {missing}" in plan
    assert "apply 1 step on this machine (" in plan
    # The plan before the question offers no other way to apply it.
    assert "nothing was changed yet" in plan and "--apply runs the steps" not in plan

    session.type("y")
    code = session.finish()
    assert code == 0 and missing.is_dir()
    assert "✓ fixed" in session.seen


def test_doctor_fix_answered_no_changes_nothing(place):
    missing = place / "runs" / "ckpt"
    session = TerminalSession(*DOCTOR, "--output-dir", str(missing), "--fix")

    session.read_until("[y/N]")
    session.type("")
    code = session.finish()

    assert code == 1 and "nothing applied" in session.seen
    assert not (place / "runs").exists()


def test_doctor_fix_with_nothing_to_fix_asks_nothing_even_without_a_terminal(place):
    result = subprocess.run(
        [sys.executable, "-m", "computefence", *DOCTOR, "--output-dir", str(place), "--fix"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert "nothing to apply" in result.stderr and "[y/N]" not in result.stderr + result.stdout
