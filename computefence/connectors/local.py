"""Run the probe on this machine, the way the fleet runs it on a pod: `python -` with the
script (parameters embedded) on stdin."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

from computefence.connectors.interface import Outcome, host_report
from computefence.connectors.payload import parse_probe_output
from computefence.connectors.shell import LocalShell, Shell
from computefence.errors import ProbeOutputError
from computefence.models import Facts, HostReport, HostStatus, Target
from computefence.probe.assemble import probe_payload
from computefence.text import one_line


class LocalConnector:
    """This machine, as `doctor` checks it: the report is named after its hostname."""

    def __init__(self, timeout: float):
        # Bounds the whole subprocess; the probe's own deadline (params["deadline_s"]) is
        # shorter, so it answers with timed-out collectors rather than being killed.
        self.timeout = timeout

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        started = time.monotonic()
        try:
            facts = await probe_local(params, self.timeout)
        except ProbeOutputError as exc:
            outcome = Outcome(HostStatus.PROBE_FAILED, str(exc))
        else:
            outcome = Outcome(HostStatus.OK, "probe completed", facts=facts)
            target = target.model_copy(update={"name": facts.identity.hostname or target.name})
        report = host_report(target, outcome, time.monotonic() - started)
        # No SSH port here: this machine is not reached through one; a finished probe needs no reason.
        return report.model_copy(
            update={"port": None, "reason": report.reason if outcome.status is not HostStatus.OK else None}
        )

    async def open_shell(self, target: Target) -> Shell | Outcome:
        """This machine's command session (`doctor --fix`)."""
        return LocalShell()


async def probe_local(params: dict[str, Any], timeout: float) -> Facts:
    """Facts about this machine, or ProbeOutputError with a one-line reason."""
    payload = probe_payload(params).encode("utf-8")
    # -I: the probe is stdlib only; a json.py or threading.py in the user's working
    # directory must not shadow the standard library. Its subprocesses (the training
    # interpreter) still inherit the environment, PYTHONPATH included.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(payload), timeout)
    except BaseException as exc:  # the timeout, or Ctrl-C cancelling the run
        _kill_group(proc)
        await proc.wait()
        if isinstance(exc, asyncio.TimeoutError):
            raise ProbeOutputError(f"the probe did not finish within {timeout:g}s and was stopped") from None
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


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return one_line(lines[-1], 200) if lines else ""
