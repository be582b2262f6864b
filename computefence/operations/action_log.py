"""The append-only record of every call ComputeFence makes to change a provider account.

`fleet release --yes` appends one JSON line before each provider call ("send": what is about
to be asked, of which pod) and one after it ("answer": the outcome and the provider's words,
redacted of keys and every other secret), so that a run killed between the two still shows what may have
happened. The file is $XDG_STATE_HOME/computefence/actions.jsonl (~/.local/state when unset)
or --log FILE. Its path is checked before the run starts, and the file is created (mode 0600,
never through a symbolic link) with the first line, which comes before the first call is sent:
a run that sends nothing, or is interrupted before it does, leaves no file behind. Each line is
one O_APPEND write, flushed to disk, so concurrent runs never interleave within a line.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from computefence.errors import ConfigError
from computefence.redaction import redact
from computefence.text import clean

FILE_NAME = "actions.jsonl"


def default_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "computefence" / FILE_NAME


class ActionLog:
    """Lines go to the file `open_log` checked; it is opened with the first of them."""

    def __init__(self, path: Path, run: dict[str, Any], *, make_folder: bool):
        self.path, self.run, self.make_folder = path, run, make_folder
        self.fd: int | None = None
        # Calls logged as about to be sent: what a run interrupted mid-way may have done.
        self.sends = 0

    def record(self, event: str, **fields: Any) -> None:
        entry = {
            "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "event": event,
            **self.run,
            **{k: redact(clean(v)) if isinstance(v, str) else v for k, v in fields.items()},
        }
        line = (json.dumps(entry, ensure_ascii=True, sort_keys=False) + "\n").encode()
        if self.fd is None:
            self.fd = _open(self.path, make_folder=self.make_folder)
        try:
            os.write(self.fd, line)
            os.fsync(self.fd)
        except OSError as exc:
            raise ConfigError(f"--log {self.path}: {exc.strerror or exc}") from None
        if event == "send":
            self.sends += 1

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> ActionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_log(path: Path | None, run: dict[str, Any]) -> ActionLog:
    """The log to append to, its path checked now: one that cannot take lines is a ConfigError
    naming --log, before the run starts. An existing file is opened at once (opening changes
    nothing); a new one, and the default path's folder, are made with the first line."""
    default = path is None
    target = default_path() if path is None else path
    log = ActionLog(target, run, make_folder=default)
    if not default and not target.parent.is_dir():
        raise ConfigError(f"--log {target}: directory {target.parent} does not exist")
    if os.path.lexists(target):
        log.fd = _open(target, make_folder=False)
    elif not default and not os.access(target.parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--log {target}: cannot create it in {target.parent}: permission denied")
    return log


def _open(target: Path, *, make_folder: bool) -> int:
    if make_folder:
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise ConfigError(f"--log {target}: cannot create its folder: {exc.strerror or exc}") from None
    # O_NONBLOCK: a FIFO with no reader fails here instead of hanging the run. O_NOFOLLOW: a
    # link planted at the log's path would have the record appended to whatever it points at.
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except IsADirectoryError:
        raise ConfigError(f"--log {target} is a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(
                f"--log {target} is a symbolic link; the action log is never written through one"
            ) from None
        raise ConfigError(f"--log {target}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"--log {target}: not a regular file; the action log is appended to a file")
    return fd
