"""Ctrl-C at any moment of a run's first second (the CLI's imports, argument parsing, the demo
fleet starting, the event loop starting, the first probes), through `python -m computefence`
and through the installed `computefence` console script: one line and exit 130, never a
traceback, never a silent exit, never a run that goes on to the end.

Each delay counts from the moment the interpreter runs its first line of code: a Ctrl-C during
CPython's own start (its site module and the .pth files of site-packages), or in the first
milliseconds while it finds and imports the package's __init__ and __main__ (before any
ComputeFence statement runs), is CPython's to report.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pip._vendor.distlib.scripts import ScriptMaker

REPO = Path(__file__).resolve().parents[2]
STARTED = "python started"


def _console_script(directory: Path) -> Path:
    """The `computefence` script as pip writes it on install, from pyproject's entry point."""
    scripts = (REPO / "pyproject.toml").read_text().split("[project.scripts]", 1)[1]
    entry = re.search(r'^computefence = "([^"]+)"$', scripts, re.M).group(1)
    maker = ScriptMaker(None, str(directory))
    maker.executable = sys.executable
    maker.variants = {""}
    (path,) = maker.make(f"computefence = {entry}")
    return Path(path)


def _interrupted(entry: str, after_s: float, tmp_path: Path, *, ignored: bool = False) -> tuple[int, str]:
    if entry == "module":
        prepare, run = "import runpy", "runpy.run_module('computefence', run_name='__main__', alter_sys=True)"
    else:
        script = str(_console_script(tmp_path))
        prepare = f"code = compile(open({script!r}).read(), {script!r}, 'exec')"
        run = "exec(code, {'__name__': '__main__'})"
    code = f"import sys; {prepare}; sys.stderr.write({STARTED!r} + '\\n'); sys.stderr.flush(); {run}"
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-c", code, "fleet", "check", "--demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # As a non-interactive shell starts `cmd &`, or nohup does: SIGINT ignored from the start.
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None,
    )
    assert process.stderr.readline() == STARTED + "\n"
    time.sleep(after_s)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


# Within the run: the demo fleet's whole check now ends in about 1.5 s (commands load only
# what they use), and a Ctrl-C after its verdict is decided leaves that verdict's exit status.
DELAYS = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("after_s", DELAYS)
def test_ctrl_c_during_startup_is_one_line_and_exit_130(after_s, tmp_path):
    code, err = _interrupted("module", after_s, tmp_path)
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # Progress lines (once pods answer) ending in the one interrupt line.
    assert err.splitlines()[-1].startswith("computefence: interrupted"), err
    assert sum(line.startswith("computefence: interrupted") for line in err.splitlines()) == 1


@pytest.mark.parametrize("after_s", [0.05, 0.1, 0.3, 0.6])
def test_the_console_script_is_one_line_and_exit_130_too(after_s, tmp_path):
    code, err = _interrupted("script", after_s, tmp_path)
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines()[-1].startswith("computefence: interrupted"), err


@pytest.mark.parametrize("after_s", [0.1, 0.5, 1.0])
def test_a_run_started_with_sigint_ignored_keeps_ignoring_it_and_gives_its_verdict(after_s, tmp_path):
    code, err = _interrupted("script", after_s, tmp_path, ignored=True)
    assert code == 1, err  # the demo's blockers: the run went on to its own verdict
    assert "interrupted" not in err and "Traceback" not in err, err


HALF_BUILT = """
import os, signal, sys
from computefence.interrupt import install_for_the_cli
install_for_the_cli()
class HalfBuilt:  # as an event loop whose constructor a Ctrl-C cut short
    def __del__(self):
        raise AttributeError("no attribute '_thread_id'")
half = HalfBuilt()
try:
    if sys.argv[1] == "interrupt":
        os.kill(os.getpid(), signal.SIGINT)
        signal.pause()
finally:
    del half
"""


def test_what_a_ctrl_c_cut_short_reports_nothing_when_collected():
    done = subprocess.run([sys.executable, "-c", HALF_BUILT, "interrupt"], capture_output=True, text=True, timeout=60)
    assert "KeyboardInterrupt" in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    # Without a Ctrl-C, Python's own report stands.
    done = subprocess.run([sys.executable, "-c", HALF_BUILT, "calm"], capture_output=True, text=True, timeout=60)
    assert "Exception ignored" in done.stderr and "_thread_id" in done.stderr, done.stderr
