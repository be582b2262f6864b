"""Which cipher the SSH runner negotiates: AES-GCM where offered, unless the user's ssh_config says."""

from __future__ import annotations

import asyncssh
from loopback_pod import probe_loopback_pod

from computefence.connectors import ssh
from computefence.models import HostStatus, Target


def _negotiated(tmp_path, ssh_config: str | None = None) -> tuple[HostStatus, list[str]]:
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key.write_private_key(str(tmp_path / "id"))
    (tmp_path / "id").chmod(0o600)
    ciphers: list[str] = []

    def record_cipher(process: asyncssh.SSHServerProcess) -> None:
        ciphers.append(process.get_extra_info("connection").get_extra_info("recv_cipher"))

    def target(port: int) -> Target:
        return Target(
            name="pod",
            host="127.0.0.1",
            port=port,
            user="root",
            identity_files=[str(tmp_path / "id")],
            ssh_config=ssh_config,
        )

    return probe_loopback_pod(tmp_path, client_key, target, record_cipher), ciphers


def test_aes_gcm_is_chosen_when_the_server_offers_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config with a Ciphers line
    ssh._ciphers_configured.cache_clear()
    assert _negotiated(tmp_path) == (HostStatus.OK, ["aes128-gcm@openssh.com"])


def test_a_ciphers_line_in_the_ssh_config_is_the_users_choice(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n    Ciphers chacha20-poly1305@openssh.com\n")
    assert _negotiated(tmp_path, str(config)) == (HostStatus.OK, ["chacha20-poly1305@openssh.com"])
