"""Fixtures shared across the suite: the real OpenSSH sshd fleet (tests/sshfleet.py)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile

import pytest
from slurmcluster import NodeSpec, SlurmCluster, slurm_unavailable_reason
from sshfleet import PodSpec, SshFleet, fleet_unavailable_reason


@functools.cache
def package_index_unreachable_reason() -> str | None:
    """Why pip cannot fetch from its configured index here, or None. Asked once, of pip itself
    (its own index settings, proxies and certificates), with a build requirement of ours."""
    with tempfile.TemporaryDirectory() as dest:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--retries", "0", "--timeout", "15"]
                + ["--dest", dest, "hatchling"],
                capture_output=True,
                text=True,
                timeout=120,
            )
        except subprocess.TimeoutExpired:
            return "pip could not reach the package index within 120 s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"pip could not reach the package index: {last}"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("network") is not None:
        reason = package_index_unreachable_reason()
        if reason is not None:
            pytest.skip(reason)


@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    """Run the CLI in-process with an empty HOME and no COMPUTEFENCE_POLICY: (exit code, stdout, stderr)."""
    from computefence.cli import main

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("COMPUTEFENCE_POLICY", raising=False)

    def run(*argv: str):
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_sshd_fleet() -> None:
    """Skip locally when sshd pods cannot run here; in CI that is a failure, never a skip."""
    reason = fleet_unavailable_reason()
    if reason is None:
        return
    if _in_ci():
        pytest.fail(f"the sshd fleet tests must run in CI, but: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def ssh_fleet(tmp_path_factory) -> SshFleet:
    """The fleet manager; pods started through it are stopped at the end of the session."""
    require_sshd_fleet()
    fleet = SshFleet(tmp_path_factory.mktemp("sshfleet"))
    yield fleet
    fleet.stop_all()


@pytest.fixture
def start_pods(ssh_fleet):
    """Start pods for one test (in parallel); they are stopped when the test ends."""
    started = []

    def start(*specs: PodSpec):
        pods = ssh_fleet.start(list(specs))
        started.extend(pods)
        return pods

    yield start
    for pod in started:
        ssh_fleet.stop(pod)


def require_slurm() -> None:
    """Skip locally when a Slurm cluster cannot run here; in CI that is a failure, never a skip."""
    reason = slurm_unavailable_reason()
    if reason is None:
        return
    if _in_ci():
        pytest.fail(f"the Slurm tests must run in CI, but: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def slurm_tools() -> None:
    """Slurm's client tools (and the cluster's parts) are installed here, or the test skips."""
    require_slurm()


@pytest.fixture(scope="module")
def start_slurm(tmp_path_factory):
    """Start a Slurm cluster of the given nodes for one test module; stopped when it ends."""
    started: list[SlurmCluster] = []

    def start(nodes: list[NodeSpec], **options) -> SlurmCluster:
        require_slurm()
        cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"), nodes, **options)
        started.append(cluster)
        return cluster.start()

    yield start
    for cluster in started:
        cluster.stop()
