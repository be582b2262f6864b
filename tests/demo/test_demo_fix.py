"""`computefence fleet fix --demo`: the plan, the question after it, the steps run on the
simulated pods and each finding's outcome. Every fix names only the demo's own files: the user's
interpreter, home and dotfiles are never named and never touched."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from terminal_session import TerminalSession


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "100"}


def _outside_the_demo(command: str, tmp_path: Path) -> list[str]:
    """The paths a shell command names (its words that start with / or ~) outside the demo's folder."""
    demo = str(tmp_path / "tmp") + "/"
    return [w for w in shlex.split(command) if w.startswith(("/", "~")) and not w.startswith(demo)]


def test_fix_demo_shows_the_plan_asks_then_fixes_inside_the_demo_only(tmp_path):
    session = TerminalSession("fleet", "fix", "--demo", "--apply", env=_env(tmp_path))

    asked = session.read_until("[y/N]")
    plan = asked[asked.index("ComputeFence fix · plan") :]
    # Each pod's commands, in full, before the question.
    assert re.search(
        r"pod-cpu-torch: .*\n  would run, in order:\n    \S+/pod-cpu-torch/bin/python3 -m pip uninstall", plan
    )
    assert "pod-ephemeral-ckpt" in plan and "num_processes: 1" in plan
    assert "apply 2 steps on 2 pods (pod-" in plan

    session.type("y")
    code = session.finish()

    after = session.seen[len(asked) :]
    assert re.search(r"✓ fixed +gpu\.torch-cpu-build", after), after
    assert re.search(r"✓ fixed +accelerate\.num-processes", after), after
    assert "NOT FIXED  3 fixed" in after  # the driver faults stay: no command on the pod helps
    assert code == 1
    assert sys.executable not in session.seen and os.path.realpath(sys.executable) not in session.seen
    commands = [line.split("] ", 1)[1] for line in after.splitlines() if line.startswith("  [ran")]
    assert len(commands) == 2 and [p for c in commands for p in _outside_the_demo(c, tmp_path)] == []
    assert list((tmp_path / "home").iterdir()) == [] and list((tmp_path / "tmp").iterdir()) == []


def test_check_demo_fixes_name_no_path_outside_the_demo(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "computefence", "fleet", "check", "--demo", "--format", "json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    report = json.loads(result.stdout)
    fixes = [h["fix"] for h in report["hosts"] if h.get("fix")]
    fixes += [step["run"] for h in report["hosts"] for f in h["findings"] for step in (f.get("fix_steps") or [])]
    assert any("-m pip install torch" in fix for fix in fixes)
    assert [path for fix in fixes for path in _outside_the_demo(fix, tmp_path)] == []
