"""Run the probe on this machine, the way the fleet runs it on a pod: `python -` with the
script (parameters embedded) on stdin."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from computefence.errors import ProbeOutputError
from computefence.models import Facts
from computefence.payload import parse_probe_output, probe_payload


def run_probe_local(params: dict, timeout: float) -> Facts:
    """Facts about this machine, or ProbeOutputError with a one-line reason.

    `timeout` bounds the whole subprocess; the probe's own deadline (params["deadline_s"])
    should be shorter so it answers with timed-out collectors rather than being killed.
    """
    payload = probe_payload(params).encode("utf-8")
    # -I: the probe is stdlib only; a json.py or threading.py in the user's working
    # directory must not shadow the standard library. Its subprocesses (the training
    # interpreter) still inherit the environment, PYTHONPATH included.
    proc = subprocess.Popen(
        [sys.executable, "-I", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise ProbeOutputError(f"the probe did not finish within {timeout:g}s and was stopped") from None
    except BaseException:
        _kill_group(proc)
        proc.communicate()
        raise
    # The probe exits without waiting for hung collectors' children (a wedged
    # nvidia-smi); they are in its session and must not outlive the command.
    _kill_group(proc)
    try:
        return parse_probe_output(stdout)
    except ProbeOutputError as exc:
        detail = _last_line(stderr)
        if proc.returncode or detail:
            raise ProbeOutputError(f"{exc} (exit status {proc.returncode}{': ' + detail if detail else ''})") from None
        raise


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return "".join(ch if ch.isprintable() else "?" for ch in lines[-1])[:200] if lines else ""
