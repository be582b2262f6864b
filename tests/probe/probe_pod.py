"""A constructed pod for the real probe.

The probe reads /proc, /etc and /dev through injectable roots, finds nvidia-smi on PATH and
torch on the training interpreter's path, so a pod is: a tmp tree with those roots, a PATH
holding a fake nvidia-smi, a PYTHONPATH holding a fake torch, and a recorded mountinfo
whose volume mount points are rewritten to real tmp directories (the probe matches mounts
from the mountinfo text and asks the real filesystem about existence, access and space).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from computefence.connectors.payload import parse_probe_output
from computefence.demo.fakes import write_fake_nvidia_smi, write_fake_torch
from computefence.models import Facts
from computefence.probe.assemble import probe_payload

MOUNTINFO = Path(__file__).resolve().parent.parent / "fixtures" / "mountinfo"


def _find_python38() -> str | None:
    # A pyenv shim is on PATH even where it cannot run 3.8: try each candidate for real.
    for candidate in (shutil.which("python3.8"), "/root/.pyenv/versions/3.8.18/bin/python3.8", "/usr/bin/python3.8"):
        if candidate and os.access(candidate, os.X_OK):
            check = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"], capture_output=True, text=True
            )
            if check.stdout.strip() == "True":
                return candidate
    return None


PYTHON38 = _find_python38()

UBUNTU_OS_RELEASE = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
"""


def escape_mount_point(path: str) -> str:
    """The octal escapes the kernel writes in mountinfo."""
    return path.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012")


@dataclass
class ProbeRun:
    facts: Facts
    document: dict
    stdout: bytes
    stderr: bytes
    elapsed: float


class Pod:
    def __init__(self, root: Path):
        self.root = root
        self.proc = root / "proc"
        self.etc = root / "etc"
        self.dev = root / "dev"
        self.bin = root / "bin"
        self.site = root / "site"
        self.home = root / "home" / "root"
        self.cwd = root / "work"
        for path in (self.proc / "self", self.proc / "1", self.etc, self.dev, self.bin, self.home, self.cwd):
            path.mkdir(parents=True, exist_ok=True)
        (self.proc / "meminfo").write_text("MemTotal:       263855104 kB\nMemFree:        250000000 kB\n")
        (self.etc / "os-release").write_text(UBUNTU_OS_RELEASE)
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.home), "LANG": "C.UTF-8"}
        # No training interpreter unless a test gives one (torch() does): importing the real
        # torch costs seconds that most tests do not need.
        self.params: dict = {"python": str(root / "no-python3")}
        self.mountinfo("vast-no-volume")

    # ------------------------------------------------------------ building

    def mountinfo(self, fixture: str, remap: dict[str, str] | None = None) -> dict[str, Path]:
        """Install a recorded mountinfo; mount points in `remap` move to real dirs under the pod."""
        moved = {point: self.root / "mnt" / name for point, name in (remap or {}).items()}
        lines = []
        for line in (MOUNTINFO / f"{fixture}.txt").read_text().splitlines():
            fields = line.split(" ")
            if fields[4] in moved:
                moved[fields[4]].mkdir(parents=True, exist_ok=True)
                fields[4] = escape_mount_point(str(moved[fields[4]]))
            lines.append(" ".join(fields))
        missing = set(moved) - {line.split(" ")[4] for line in (MOUNTINFO / f"{fixture}.txt").read_text().splitlines()}
        assert not missing, f"{fixture} has no mount at {missing}"
        self.write_mountinfo("\n".join(lines) + "\n")
        return moved

    def write_mountinfo(self, text: str) -> None:
        (self.proc / "self" / "mountinfo").write_text(text)

    def container_env(self, raw: bytes) -> None:
        (self.proc / "1" / "environ").write_bytes(raw)

    def etc_file(self, name: str, text: str) -> Path:
        path = self.etc / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def nvidia(self, scenario: str) -> Path:
        return write_fake_nvidia_smi(self.bin, scenario)

    def torch(self, scenario: str, canary: dict | None = None) -> Path:
        self.params["python"] = sys.executable
        self.env["PYTHONPATH"] = str(self.site)
        return write_fake_torch(self.site, scenario, canary)

    def gpu_nodes(self, count: int) -> None:
        for index in range(count):
            (self.dev / f"nvidia{index}").touch()
        (self.dev / "nvidiactl").touch()

    # ------------------------------------------------------------ running

    def run(self, interpreter: str = sys.executable, timeout: float = 90, **params) -> ProbeRun:
        """The real probe run by `interpreter -` as the fleet sends it, its output validated as Facts.

        Keyword arguments are probe params (python= is the training interpreter)."""
        full = dict(self.params)
        full["roots"] = {"proc": str(self.proc), "etc": str(self.etc), "dev": str(self.dev)}
        full.update(params)
        started = time.monotonic()
        done = subprocess.run(
            [interpreter, "-"],
            input=probe_payload(full).encode(),
            capture_output=True,
            env=self.env,
            cwd=self.cwd,
            timeout=timeout,
        )
        elapsed = time.monotonic() - started
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert len(done.stdout.splitlines()) == 1, done.stdout[:2000]
        return ProbeRun(
            facts=parse_probe_output(done.stdout),
            document=json.loads(done.stdout),
            stdout=done.stdout,
            stderr=done.stderr,
            elapsed=elapsed,
        )


def path_fact(facts: Facts, role: str, path: str | None = None):
    found = [p for p in facts.storage.paths if p.role == role and (path is None or p.path == path)]
    assert len(found) == 1, f"{role} {path}: {[p.path for p in facts.storage.paths if p.role == role]}"
    return found[0]


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains `text` (to prove children were killed)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                pids.append(int(entry))
    return pids
