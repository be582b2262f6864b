"""An asyncssh server on loopback that accepts one client key and gives the smallest answer the
runner takes for a probe's; probing a target against it says how the runner logged in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import asyncssh

from computefence.connectors.ssh import RunOptions, probe_targets
from computefence.models import HostStatus, Target

# An empty `{}` is probe_failed; this is the least the runner reads as an answer.
ANSWER = b'{"probe_schema_version": 1, "identity": {}, "storage": {}, "gpu": {}}\n'


def probe_loopback_pod(
    tmp_path: Path,
    accepted: asyncssh.SSHKey,
    make_target: Callable[[int], Target],
    on_session: Callable[[asyncssh.SSHServerProcess], None] | None = None,
) -> HostStatus:
    """The status of probing `make_target(port)` (its known_hosts set to the server's key)."""
    host_key = asyncssh.generate_private_key("ssh-ed25519")

    async def answer(process: asyncssh.SSHServerProcess) -> None:
        if on_session is not None:
            on_session(process)
        while await process.stdin.read(65536):
            pass
        process.stdout.write(ANSWER)
        process.exit(0)

    async def run() -> HostStatus:
        server = await asyncssh.listen(
            "127.0.0.1",
            0,
            server_host_keys=[host_key],
            process_factory=answer,
            encoding=None,
            authorized_client_keys=asyncssh.import_authorized_keys(accepted.export_public_key().decode()),
        )
        port = server.get_port()
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode()}")
        target = make_target(port).model_copy(update={"known_hosts": [str(known)]})
        try:
            (report,) = await probe_targets(
                [target], RunOptions(own_known_hosts=tmp_path / "own", use_user_known_hosts=False)
            )
        finally:
            server.close()
        return report.status

    return asyncio.run(run())
