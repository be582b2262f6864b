"""A command run in a real pseudo-terminal: what a person at a keyboard sees and types."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class TerminalSession:
    """`python -m computefence ARGV` on a pty (stdin, stdout and stderr all the terminal)."""

    def __init__(
        self, *argv: str, cwd: Path | None = None, columns: int = 100, env: dict[str, str] | None = None
    ) -> None:
        self._master, slave = pty.openpty()
        env = dict(env or os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(columns), TERM="xterm")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "computefence", *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.seen = ""

    def read_until(self, text: str, timeout: float = 120.0) -> str:
        """Everything shown up to and including `text`; fails with the screen so far if it never comes."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"never saw {text!r}; the terminal showed:\n{self.seen}")
        return self.seen[: self.seen.index(text) + len(text)]

    def type(self, line: str) -> None:
        os.write(self._master, line.encode() + b"\r")

    def finish(self, timeout: float = 120.0) -> int:
        """Read the rest of the screen and the exit status."""
        deadline = time.monotonic() + timeout
        while self._read(max(0.0, deadline - time.monotonic())):
            pass
        code = self._process.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(self._master)
        return code

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self._master, 65536)
        except OSError:  # EIO: the command exited and closed the terminal
            return False
        if not chunk:
            return False
        self.seen += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        return True
