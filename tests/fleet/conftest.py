"""Fixtures for the end-to-end fleet tests: an isolated home, the CLI in-process, shared pods."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import HEALTHY, CliRun
from sshfleet import Pod, PodSpec, SshFleet

from computefence.cli import main


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh HOME and XDG_CONFIG_HOME: no real ~/.ssh or ComputeFence known-hosts leak in or out."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


@pytest.fixture
def run_cli(capsys, home):
    """Run `computefence ...` in this process; returns exit code, stdout and stderr."""

    def run(*argv: str) -> CliRun:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return CliRun(code, out, err)

    return run


@pytest.fixture(scope="session")
def healthy_pods(ssh_fleet: SshFleet) -> list[Pod]:
    """Two well-configured pods shared by the tests that only read from them."""
    return ssh_fleet.start(
        [
            PodSpec("healthy-a", **HEALTHY),
            PodSpec(
                "healthy-b",
                nvidia_smi="h100x1",
                torch="cu121-h100",
                workspace_size="200G",
                env={"HF_HOME": "/workspace/hf"},
            ),
        ]
    )
