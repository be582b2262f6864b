"""`fleet check --history DIR`: every run's JSON report kept as DIR/YYYYmmddTHHMMSSZ.json,
the newest N of them, and a lock so two cron runs on one directory never interleave.

Beside each run, DIR/YYYYmmddTHHMMSSZ.digest: its digest (JSON) (models.RunDigestFile, a few
KB where the run is megabytes), which `report history` and `hosts` read instead of the run.
It is written with the run, and made again from the run (and rewritten, where the directory
allows) when it is missing, unreadable, or no longer matches the run's size and time.

The lock (DIR/.lock, flock) is held for the whole run: a second run waits for it, then
compares with the first one's result, or gives up with one line naming the holder. The
kernel drops the lock when its holder dies, even by kill -9; an entry is either fully
written or absent (atomic write), so a killed run leaves the history as it was.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from pydantic import Field

from computefence.errors import ComputeFenceError, ConfigError
from computefence.evaluate.changes import compare_reports
from computefence.evaluate.ledger import digest_run, machine_key
from computefence.files import read_config_bytes, write_output
from computefence.models import (
    Changes,
    HostReport,
    HostStatus,
    HostVerdict,
    Report,
    RunDigestFile,
    Severity,
    Summary,
)
from computefence.saved_files import load_report, report_chunks

ENTRY_RE = re.compile(r"^\d{8}T\d{6}Z\.json$")
_STAMP = "%Y%m%dT%H%M%SZ"
LOCK_NAME = ".lock"
_POLL_S = 0.2
DIGEST_SUFFIX = ".digest"
# A digest holds no facts: a few KB per pod at most.
_MAX_DIGEST_BYTES = 256 << 20


class HistoryLocked(ComputeFenceError):
    """Another run holds the history directory past --history-wait. Exit 2."""


class History:
    """One history directory, locked by this process for as long as the object is in use."""

    def __init__(self, directory: Path, keep: int):
        self.directory = directory
        self.keep = keep
        self._warned: set[str] = set()

    def _warn(self, line: str) -> None:
        if line not in self._warned:  # once a run, however often the entries are listed
            self._warned.add(line)
            print(line, file=sys.stderr)

    def entries(self) -> list[Path]:
        """The run files, oldest first (their names sort by time). A name that looks like a run
        but is no time, or is not a regular file, is skipped with a warning."""
        entries = []
        for path in sorted(p for p in self.directory.iterdir() if ENTRY_RE.match(p.name)):
            problem = _not_an_entry(path)
            if problem:
                self._warn(f"computefence: warning: history: skipping {path}: {problem}")
                continue
            entries.append(path)
        return entries

    def latest(self) -> Report | None:
        """The newest readable run; an unreadable entry is skipped with a warning."""
        for path in reversed(self.entries()):
            try:
                return load_report(path)
            except ConfigError as exc:
                self._warn(f"computefence: warning: history: skipping {exc}")
        return None

    def with_changes(self, report: Report) -> Report:
        """`report` with what changed since the newest run in the history (none: unchanged)."""
        previous = self.latest()
        if previous is None:
            return report
        return report.model_copy(update={"changes": compare_reports(previous, report)})

    def save(self, report: Report) -> Path:
        """Add the run under its own UTC time (a second later than the newest, if it has
        to be), then keep the newest `keep` runs."""
        when = _utc(report.generated_at)
        entries = self.entries()
        if entries:
            newest = _entry_time(entries[-1])
            # An entry dated in the far future (9999-12-31) is no run to follow.
            if newest is not None and newest < when + timedelta(days=1):
                when = max(when, newest + timedelta(seconds=1))
        path = self.directory / f"{when.strftime(_STAMP)}.json"
        write_output(report_chunks(report), path, flag="--history")
        _write_digest(path, digest_run(report))
        self._prune()
        return path

    def _prune(self) -> None:
        """Delete the runs beyond the newest `keep`: only files that read as ComputeFence
        reports; anything else that has a run's name stays, with a warning."""
        for old in self.entries()[: -self.keep]:
            try:
                load_report(old, model=_RunSeen)
            except ConfigError as exc:
                self._warn(f"computefence: warning: history: not deleting {exc}")
                continue
            old.unlink(missing_ok=True)
            digest_path(old).unlink(missing_ok=True)


def digest_path(run: Path) -> Path:
    return run.with_name(run.stem + DIGEST_SUFFIX)


def _write_digest(run: Path, digest: RunDigestFile) -> None:
    """Write `digest` beside `run`, naming the run file it was made from; where it cannot be
    written (a read-only history), the run is digested again the next time it is read."""
    target = digest_path(run)
    try:
        if not stat.S_ISREG(target.lstat().st_mode):
            return  # a FIFO, link or folder with its name is not ours to write through or replace
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        info = run.stat()
        stamped = digest.model_copy(update={"run_size": info.st_size, "run_mtime_ns": info.st_mtime_ns})
        write_output(stamped.model_dump_json(exclude_defaults=True), target, flag="--history")
    except (OSError, ConfigError):
        pass


def read_digest(run: Path) -> RunDigestFile:
    """The digest of the run file `run`: the one saved beside it where it still matches the
    run, else made from the run (ConfigError where the run does not read) and saved."""
    try:
        info = run.stat()
        saved = RunDigestFile.model_validate_json(
            read_config_bytes(digest_path(run), "run digest", limit=_MAX_DIGEST_BYTES)
        )
        if (saved.run_size, saved.run_mtime_ns) == (info.st_size, info.st_mtime_ns):
            return saved
    except (OSError, ConfigError, ValueError):  # missing, not a file, too big, not a digest
        pass
    digest = digest_run(load_report(run))
    _write_digest(run, digest)
    return digest


def _entry_time(path: Path) -> datetime | None:
    try:
        return datetime.strptime(path.stem, _STAMP).replace(tzinfo=timezone.utc)
    except ValueError:  # 20251399T999999Z: digits, but no time
        return None


def _not_an_entry(path: Path) -> str | None:
    if _entry_time(path) is None:
        return "its name is not a valid UTC time"
    try:
        info = path.lstat()
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    return None


def _utc(generated_at: str) -> datetime:
    try:
        when = datetime.fromisoformat(generated_at)
    except ValueError:
        return datetime.now(timezone.utc).replace(microsecond=0)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    try:
        return when.astimezone(timezone.utc).replace(microsecond=0)
    except OverflowError:  # 9999-12-31T23:59:59-01:00
        return datetime.now(timezone.utc).replace(microsecond=0)


@contextlib.contextmanager
def open_history(directory: Path, *, keep: int, wait: float) -> Iterator[History]:
    """The history directory (created if missing), locked; HistoryLocked after `wait` seconds."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--history {directory}: {exc.strerror or exc}") from None
    if not directory.is_dir():
        raise ConfigError(f"--history {directory}: not a directory")
    lock_path = directory / LOCK_NAME
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ConfigError(f"--history {directory}: cannot open {lock_path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"--history {directory}: {lock_path} is not a regular file")
        _lock(fd, lock_path, wait)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {datetime.now(timezone.utc).strftime('%H:%M:%SZ')}\n".encode(), 0)
        yield History(directory, keep)
    finally:
        os.close(fd)  # releases the lock


def _lock(fd: int, lock_path: Path, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another run"
                raise HistoryLocked(
                    f"another computefence run ({holder}) holds {lock_path}; gave up after {wait:g} s "
                    "(raise --history-wait to wait longer)"
                ) from None
            time.sleep(_POLL_S)


# ---------------------------------------------------------------- reading a pool's history back


@dataclass(frozen=True)
class PodRun:
    """One pod in one run, as the history page draws it."""

    verdict: HostVerdict
    status: HostStatus
    # Its blockers, then its warnings: (check, severity).
    problems: tuple[tuple[str, Severity], ...]
    reason: str | None
    provider_id: str | None
    # The physical machine behind the pod, where the provider names it: (provider, machine id).
    machine: tuple[str, str] | None = None


@dataclass(frozen=True)
class RunDigest:
    """What the history page needs of one saved run; its facts are read and dropped."""

    name: str  # the entry's file name
    generated_at: str
    summary: Summary
    fail_on: Severity
    pods: dict[str, PodRun]  # in the run's order
    changes: Changes | None


class _HostSeen(HostReport):
    # Read as plain JSON and dropped: a 1,000-pod run's facts are most of its size.
    facts: Any = None


class _RunSeen(Report):
    hosts: list[_HostSeen] = Field(default_factory=list)  # type: ignore[assignment]  # read-only view


def read_digests(directory: Path, last: int | None = None) -> Iterator[tuple[str, RunDigestFile]]:
    """(entry name, digest) of the newest `last` (None: all) runs in a --history directory,
    oldest first, one at a time (a pool's day of runs is not held at once); an unreadable run
    is skipped with a warning."""
    try:
        entries = History(directory, keep=0).entries()
    except OSError as exc:
        raise ConfigError(f"{directory}: {exc.strerror or exc}") from None
    for path in entries if last is None else entries[-last:]:
        try:
            digest = read_digest(path)
        except ConfigError as exc:
            print(f"computefence: warning: history: skipping {exc}", file=sys.stderr)
            continue
        yield path.name, digest


def read_runs(directory: Path, last: int) -> list[RunDigest]:
    """The newest `last` runs in a --history directory, oldest first; an unreadable entry is
    skipped with a warning, and a directory with no readable run is a ConfigError."""
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory (a --history DIR of fleet check)")
    runs = [_digest(name, digest) for name, digest in read_digests(directory, last)]
    if not runs:
        raise no_runs(directory)
    return runs


def no_runs(directory: Path) -> ConfigError:
    """The one error of every view of a history folder that holds no run (exit 2)."""
    return ConfigError(f"{directory} holds no readable computefence run (YYYYmmddTHHMMSSZ.json)")


def _digest(name: str, run: RunDigestFile) -> RunDigest:
    pods = {}
    for pod in run.pods:
        pods[pod.name] = PodRun(
            verdict=pod.verdict,
            status=pod.status,
            problems=tuple((f.check, f.severity) for f in pod.findings),
            reason=pod.reason,
            provider_id=pod.provider.pod_id if pod.provider is not None else None,
            # The ledger's key (hosts, hosts avoid): one machine is the same machine in every view.
            machine=machine_key(pod),
        )
    return RunDigest(name, run.generated_at, run.summary, run.fail_on, pods, run.changes)
