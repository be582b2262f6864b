"""Running the user's own tools (`ssh -G`, `ansible-inventory`) under a deadline."""

from __future__ import annotations

import os
import signal
import subprocess


class ToolTimeout(Exception):
    """The tool gave no answer within its time."""


def run_tool(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """(exit status, stdout, stderr) of `argv`; OSError when it cannot start, ToolTimeout on overrun.

    The tool gets its own session, so what it starts (a `Match exec` command, an inventory
    script) is killed with it on overrun.
    """
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise ToolTimeout from None
    return process.returncode, stdout, stderr
