"""`IdentityFile none` as ssh reads it: no ~/.ssh/id_* key is tried, only the agent's keys.
A local asyncssh server accepts one key; the client's HOME holds that key as ~/.ssh/id_ed25519."""

from __future__ import annotations

import os
import subprocess

import asyncssh
import pytest
from loopback_pod import probe_loopback_pod

from computefence.models import HostStatus, Target
from computefence.sources.ssh_config import SshConfigSource


@pytest.fixture
def home_key(tmp_path, monkeypatch):
    """The one key the server accepts, saved where ssh looks for its default key."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    (tmp_path / ".ssh").mkdir()
    key.write_private_key(str(tmp_path / ".ssh/id_ed25519"))
    (tmp_path / ".ssh/id_ed25519").chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return key


def _from_config(tmp_path, body: str):
    config = tmp_path / "config"

    def make(port: int) -> Target:
        config.write_text(f"Host pod\n  HostName 127.0.0.1\n  Port {port}\n  User root\n{body}")
        (target,) = SshConfigSource(["pod"], str(config)).targets()
        return target

    return make


def test_without_identity_file_the_default_key_logs_in(tmp_path, home_key):
    assert probe_loopback_pod(tmp_path, home_key, _from_config(tmp_path, "")) == HostStatus.OK


def test_identity_file_none_tries_no_default_key(tmp_path, home_key):
    # ssh with this config offers no key and is refused; the old runner logged in with ~/.ssh/id_ed25519
    assert (
        probe_loopback_pod(tmp_path, home_key, _from_config(tmp_path, "  IdentityFile none\n"))
        == HostStatus.AUTH_FAILED
    )


def test_identity_file_none_still_offers_the_agents_keys(tmp_path, home_key, monkeypatch):
    agent = subprocess.run(["ssh-agent", "-s"], capture_output=True, text=True, check=True).stdout
    env = dict(part.split("=", 1) for part in agent.replace(";", "\n").split() if "=" in part)
    try:
        monkeypatch.setenv("SSH_AUTH_SOCK", env["SSH_AUTH_SOCK"])
        agent_key = asyncssh.generate_private_key("ssh-ed25519")
        agent_key.write_private_key(str(tmp_path / "agent_key"))
        (tmp_path / "agent_key").chmod(0o600)
        subprocess.run(["ssh-add", "-q", str(tmp_path / "agent_key")], check=True, stdin=subprocess.DEVNULL)
        (tmp_path / "agent_key").unlink()  # only the agent holds it now
        status = probe_loopback_pod(tmp_path, agent_key, _from_config(tmp_path, "  IdentityFile none\n"))
    finally:
        os.kill(int(env["SSH_AGENT_PID"]), 15)
    assert status == HostStatus.OK


def test_identity_file_none_then_a_file_uses_that_file(tmp_path, home_key):
    other = asyncssh.generate_private_key("ssh-ed25519")
    other.write_private_key(str(tmp_path / "other"))
    (tmp_path / "other").chmod(0o600)
    body = f"  IdentityFile none\n  IdentityFile {tmp_path / 'other'}\n"
    assert probe_loopback_pod(tmp_path, other, _from_config(tmp_path, body)) == HostStatus.OK
    assert probe_loopback_pod(tmp_path, home_key, _from_config(tmp_path, body)) == HostStatus.AUTH_FAILED
