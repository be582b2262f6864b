"""Mistakes on the user's side exit 2 with one line naming the fix, before any connection:
never a fleet of auth_failed pods or a "BLOCKED 0 of 0"."""

from __future__ import annotations

import socket
import sys

import pytest

from computefence.errors import SourceError
from computefence.sources import registry


@pytest.fixture
def listener():
    """A port that records whether anything connected to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def _nobody_connected(sock: socket.socket) -> bool:
    try:
        sock.accept()
    except BlockingIOError:
        return True
    return False


@pytest.mark.parametrize("problem", ["missing", "directory"])
def test_an_identity_file_that_cannot_be_used_exits_2_before_connecting(cli, tmp_path, listener, problem):
    key = tmp_path / "id_ed25519"
    if problem == "directory":
        key.mkdir()
    inventory = tmp_path / "pods.yaml"
    port = listener.getsockname()[1]
    inventory.write_text(f"hosts:\n  - {{name: pod-a, host: 127.0.0.1, port: {port}, identity_file: {key}}}\n")
    code, out, err = cli("fleet", "check", "-i", str(inventory))
    assert code == 2 and out == ""
    why = "does not exist" if problem == "missing" else "is not a file"
    assert err.startswith(f"computefence: error: identity file {key} {why} (target pod-a, from {inventory}:2)")
    assert err.count("\n") == 1 and f"ssh-keygen -t ed25519 -f {key}" in err
    assert _nobody_connected(listener)


def test_a_provider_without_an_api_key_names_the_variable_and_the_key_file(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("VAST_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, err = cli("fleet", "check", "--provider", "vast")
    assert code == 2 and out == ""
    assert "no API key found" in err and "VAST_API_KEY" in err and "vast_api_key" in err
    assert err.count("\n") == 1


def test_the_runpod_extra_missing_gives_the_exact_pip_command(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "runpod", None)  # `import runpod` raises ImportError
    monkeypatch.setenv("RUNPOD_API_KEY", "rp-test")
    code, _, err = cli("fleet", "check", "--provider", "runpod")
    assert code == 2
    assert (
        err
        == f"computefence: error: RunPod support needs its SDK: {sys.executable} -m pip install 'runpod>=1.8.1,<2'\n"
    )


def test_an_ssh_alias_no_config_knows_exits_2(cli, tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-box\n  HostName 127.0.0.1\n  Port 1\n")
    code, _, err = cli("fleet", "check", "--ssh-config", str(config), "-H", "gpu-bxo.invalid")
    assert code == 2
    assert err.startswith(f"computefence: error: -H gpu-bxo.invalid: no Host entry in {config} gives it a HostName")


class _FailingSource:
    def __init__(self, name: str):
        self.name = name

    def targets(self):
        raise SourceError(f"{self.name}: API unreachable: connection refused")


def test_every_source_failing_is_a_configuration_error_not_an_empty_verdict(cli, monkeypatch):
    monkeypatch.setattr(registry, "provider_source", lambda name, api_url=None: _FailingSource(name))
    code, out, err = cli("fleet", "check", "--provider", "vast,lambda")
    assert code == 2 and out == ""
    assert err == (
        "computefence: error: every target source failed, nothing to check: "
        "vast: API unreachable: connection refused; lambda: API unreachable: connection refused\n"
    )


def test_one_failing_source_among_working_ones_is_reported_and_the_run_goes_on(cli, monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "provider_source", lambda name, api_url=None: _FailingSource(name))
    inventory = tmp_path / "pods.yaml"
    inventory.write_text("hosts:\n  - {name: pod-a, host: 127.0.0.1, port: 1}\n")
    code, out, _ = cli("inventory", "list", "-i", str(inventory), "--provider", "vast")
    assert code == 1 and "source failed: vast: API unreachable" in out and "pod-a" in out


@pytest.mark.parametrize("flags", [[], ["--slurm-health", "--no-drain"]])
def test_doctor_log_without_a_health_check_that_drains_exits_2_and_writes_nothing(cli, tmp_path, flags):
    log = tmp_path / "actions.jsonl"
    code, out, err = cli("doctor", *flags, "--log", str(log))
    assert code == 2 and out == ""
    assert err == "computefence: error: --log records drains and resumes: it needs --slurm-health without --no-drain\n"
    assert not log.exists()
