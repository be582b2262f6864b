"""Which cipher the SSH runner negotiates: AES-GCM where offered, unless the user's ssh_config says."""

from __future__ import annotations

import asyncio

import asyncssh

from computefence.connectors import ssh
from computefence.connectors.ssh import RunOptions, probe_targets
from computefence.models import HostStatus, Target


def _negotiated(tmp_path, ssh_config: str | None = None) -> tuple[HostStatus, list[str]]:
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key.write_private_key(str(tmp_path / "id"))
    (tmp_path / "id").chmod(0o600)
    ciphers: list[str] = []

    async def answer(process: asyncssh.SSHServerProcess) -> None:
        ciphers.append(process.get_extra_info("connection").get_extra_info("recv_cipher"))
        while await process.stdin.read(65536):
            pass
        # The smallest answer the runner takes for a probe's (an empty `{}` is probe_failed).
        process.stdout.write(b'{"probe_schema_version": 1, "identity": {}, "storage": {}, "gpu": {}}\n')
        process.exit(0)

    async def run() -> HostStatus:
        server = await asyncssh.listen(
            "127.0.0.1",
            0,
            server_host_keys=[host_key],
            process_factory=answer,
            encoding=None,
            authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()),
        )
        port = server.get_port()
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode()}")
        target = Target(
            name="pod",
            host="127.0.0.1",
            port=port,
            user="root",
            identity_files=[str(tmp_path / "id")],
            known_hosts=[str(known)],
            ssh_config=ssh_config,
        )
        try:
            (report,) = await probe_targets(
                [target], RunOptions(own_known_hosts=tmp_path / "own", use_user_known_hosts=False)
            )
        finally:
            server.close()
        return report.status

    return asyncio.run(run()), ciphers


def test_aes_gcm_is_chosen_when_the_server_offers_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config with a Ciphers line
    ssh._ciphers_configured.cache_clear()
    assert _negotiated(tmp_path) == (HostStatus.OK, ["aes128-gcm@openssh.com"])


def test_a_ciphers_line_in_the_ssh_config_is_the_users_choice(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n    Ciphers chacha20-poly1305@openssh.com\n")
    assert _negotiated(tmp_path, str(config)) == (HostStatus.OK, ["chacha20-poly1305@openssh.com"])
