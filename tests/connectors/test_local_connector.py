"""The local connector: the real probe as a subprocess of this interpreter."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import pytest

from computefence.connectors import local
from computefence.connectors.local import LocalConnector, probe_local
from computefence.connectors.payload import probe_params
from computefence.errors import ProbeOutputError
from computefence.models import CheckOptions, Facts, HostStatus, Target

# No training interpreter: keeps the torch import (seconds) out of these tests.
PARAMS = probe_params(CheckOptions(), python="/nonexistent/python3")


def test_returns_facts_from_the_real_probe():
    facts = asyncio.run(probe_local(PARAMS, timeout=60))
    assert isinstance(facts, Facts)
    assert facts.identity.hostname == socket.gethostname()
    assert facts.torch.python == "/nonexistent/python3" and not facts.torch.python_found
    assert {"identity", "storage", "gpu", "torch"} <= set(facts.collectors)


def test_the_working_directory_cannot_shadow_the_standard_library(tmp_path, monkeypatch):
    (tmp_path / "json.py").write_text("raise SystemExit('shadowed json imported')\n")
    (tmp_path / "threading.py").write_text("raise SystemExit('shadowed threading imported')\n")
    monkeypatch.chdir(tmp_path)
    assert isinstance(asyncio.run(probe_local(PARAMS, timeout=60)), Facts)


def test_a_probe_past_the_timeout_is_killed_with_its_children(tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    # Stands in for a probe whose collector started a tool that hangs (a wedged nvidia-smi).
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    monkeypatch.setattr(local, "probe_payload", lambda params: script)
    started = time.monotonic()
    with pytest.raises(ProbeOutputError, match="did not finish within 1s"):
        asyncio.run(probe_local({}, timeout=1))
    assert time.monotonic() - started < 10
    child = int(pid_file.read_text())
    time.sleep(0.1)
    assert not _alive(child)


def test_garbage_output_is_a_one_line_error_with_the_exit_status(monkeypatch):
    monkeypatch.setattr(
        local,
        "probe_payload",
        lambda params: (
            "import sys\nprint('not json')\nsys.stderr.write('Traceback...\\nValueError: boom\\n')\nsys.exit(3)\n"
        ),
    )
    with pytest.raises(ProbeOutputError) as info:
        asyncio.run(probe_local({}, timeout=30))
    message = str(info.value)
    assert "not JSON" in message and "exit status 3: ValueError: boom" in message and "\n" not in message


def test_the_connector_names_the_report_after_this_machine():
    target = Target(name="localhost", host="localhost")
    report = asyncio.run(LocalConnector(timeout=60).check(target, PARAMS))
    assert report.status is HostStatus.OK and report.name == socket.gethostname() and report.host == "localhost"
    assert report.facts is not None and report.duration_s > 0


def test_the_connector_reports_a_broken_probe_as_probe_failed(monkeypatch):
    monkeypatch.setattr(local, "probe_payload", lambda params: "print('not json')\n")
    report = asyncio.run(LocalConnector(timeout=30).check(Target(name="localhost", host="localhost"), {}))
    assert report.status is HostStatus.PROBE_FAILED and report.name == "localhost" and report.facts is None
    assert report.reason.startswith("probe output is not JSON: not json")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie not yet reaped by init still answers kill(0); it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
