"""Helpers for the end-to-end fleet tests: inventories, CLI results, subprocess environment."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from sshfleet import Pod, SshFleet

from computefence.models import Report

REPO = Path(__file__).resolve().parents[2]

# A pod a training job could start on: a GPU, a CUDA torch, a persistent /workspace.
HEALTHY = dict(
    nvidia_smi="h100x1",
    torch="cu124",
    workspace_size="200G",
    env={"HF_HOME": "/workspace/hf", "RUNPOD_POD_ID": "abc123xyz"},
)
HEALTHY_CHECKS = {"output_dir": "/workspace/checkpoints"}


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str

    @property
    def report(self) -> Report:
        return Report.model_validate_json(self.stdout)

    def host(self, name: str):
        return next(h for h in self.report.hosts if h.name == name)


def host_entry(pod: Pod, name: str | None = None, **extra) -> dict:
    entry = {"name": name or pod.name, "host": pod.host, "port": pod.port}
    entry.update(extra)
    return entry


def write_inventory(
    path: Path,
    fleet: SshFleet,
    hosts: list[dict],
    *,
    trusted: list[Pod] = (),
    known_hosts_text: str | None = None,
    checks: dict | None = None,
) -> Path:
    """An inventory as a user writes one; `trusted` pods' host keys go in its known_hosts file."""
    known = path.with_suffix(".known_hosts")
    known.write_text(
        known_hosts_text if known_hosts_text is not None else "".join(pod.known_hosts_line() for pod in trusted)
    )
    document = {
        "known_hosts": str(known),
        "defaults": {
            "user": "root",
            "identity_file": str(fleet.identity_file),
            "checks": checks if checks is not None else dict(HEALTHY_CHECKS),
        },
        "hosts": hosts,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def cli_subprocess_env(home: Path) -> dict[str, str]:
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), PYTHONUNBUFFERED="1")
    env.pop("SSH_AUTH_SOCK", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


CLI = [sys.executable, "-m", "computefence"]


def json_hosts(stdout: str) -> dict[str, dict]:
    return {host["name"]: host for host in json.loads(stdout)["hosts"]}


# HEALTHY with room in /dev/shm: no warning at all, so it stays ready under --fail-on warn too.
SPOTLESS = dict(HEALTHY, shm_size="16g")
POD_TORCH_PTH = "/usr/lib/python3/dist-packages/computefence-fakes.pth"


def break_torch(pod: Pod) -> None:
    """The pod's python loses torch (python.torch-missing blocks), as after a bad `pip uninstall`."""
    pod.in_namespace(["rm", "-f", str(pod.merged) + POD_TORCH_PTH])


def fix_torch(pod: Pod) -> None:
    pod.in_namespace(
        ["sh", "-c", 'echo /opt/computefence-fakes/site-packages > "$1"', "sh", str(pod.merged) + POD_TORCH_PTH]
    )


@contextlib.contextmanager
def started_pods(fleet: SshFleet, specs: list) -> Iterator[dict[str, Pod]]:
    """Pods by name for a module's tests, stopped when the module is done."""
    pods = fleet.start(specs)
    try:
        yield {pod.name: pod for pod in pods}
    finally:
        for pod in pods:
            fleet.stop(pod)
