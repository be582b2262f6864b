"""An in-process SSH server that runs exec requests as local subprocesses in a fixed environment.

One server plays one simulated pod: what the client sends (`python3 -` with the probe on
stdin) really runs, under that pod's PATH, PYTHONPATH, HOME and working directory. Like sshd,
it kills the command's process group when the channel closes, so a probe cut off by the
client's deadline does not keep running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field

from computefence.connectors.asyncssh_quiet import asyncssh

_CHUNK = 65536


@dataclass
class PodShell:
    """How exec requests on one simulated pod run."""

    env: Mapping[str, str]
    cwd: str
    # Process groups of commands still running, and the sessions handling them, for shutdown.
    running: set[int] = field(default_factory=set)
    sessions: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        task = asyncio.current_task()
        assert task is not None  # asyncssh runs each session as a task
        self.sessions.add(task)
        try:
            await self._run(process)
        finally:
            self.sessions.discard(task)

    async def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command
        if command is None:
            process.stderr.write(b"computefence demo pod: exec requests only, no interactive shell\n")
            process.exit(1)
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(self.env),
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            process.stderr.write(f"computefence demo pod: cannot start {command!r}: {exc}\n".encode())
            process.exit(127)
            return
        self.running.add(proc.pid)
        try:
            await self._relay(process, proc)
        finally:
            _kill_group(proc.pid)
            # Reaped before the pod counts as idle (orphaned grandchildren are init's to reap).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5)
            self.running.discard(proc.pid)

    async def _relay(self, process: asyncssh.SSHServerProcess[bytes], proc: asyncio.subprocess.Process) -> None:
        outputs = [
            asyncio.ensure_future(_pump_out(proc.stdout, process.stdout)),
            asyncio.ensure_future(_pump_out(proc.stderr, process.stderr)),
        ]
        feeder = asyncio.ensure_future(_pump_in(process, proc))
        exited = asyncio.ensure_future(proc.wait())
        closed = asyncio.ensure_future(process.wait_closed())
        try:
            await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():
                # The client closed the channel mid-run: hang up on the command, as sshd does.
                return
            # Leftover children (a wedged nvidia-smi the probe gave up on) hold no answer.
            _kill_group(proc.pid)
            await asyncio.wait(outputs, timeout=5)
            returncode = exited.result()
            with contextlib.suppress(Exception):
                if returncode < 0:
                    process.exit_with_signal(signal.Signals(-returncode).name[3:])
                else:
                    process.exit(returncode)
        finally:
            for task in (*outputs, feeder, exited, closed):
                task.cancel()
            await asyncio.gather(*outputs, feeder, exited, closed, return_exceptions=True)


async def _pump_in(process: asyncssh.SSHServerProcess[bytes], proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    while True:
        try:
            data = await process.stdin.read(_CHUNK)
        except asyncssh.SignalReceived as exc:
            with contextlib.suppress(ValueError, KeyError):
                _kill_group(proc.pid, getattr(signal, "SIG" + exc.signal))
            continue
        except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged):
            continue
        except (asyncssh.Error, OSError):
            break
        if not data:
            break
        try:
            proc.stdin.write(data)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return
    with contextlib.suppress(OSError):
        proc.stdin.close()


async def _pump_out(source: asyncio.StreamReader | None, sink: asyncssh.SSHWriter[bytes]) -> None:
    assert source is not None
    while data := await source.read(_CHUNK):
        try:
            sink.write(data)
            await sink.drain()
        except (asyncssh.Error, OSError):
            return


def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class _TrackingServer(asyncssh.SSHServer):
    def __init__(self, connections: set[asyncssh.SSHServerConnection]):
        self._connections = connections
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self._conn)


@dataclass
class PodServer:
    """A listening demo pod; `port` is where it answers on 127.0.0.1."""

    shell: PodShell
    acceptor: asyncssh.SSHAcceptor
    connections: set[asyncssh.SSHServerConnection]

    @property
    def port(self) -> int:
        return self.acceptor.get_port()

    async def close(self) -> None:
        self.acceptor.close()
        for conn in list(self.connections):
            conn.close()
        for pgid in list(self.shell.running):
            _kill_group(pgid)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.acceptor.wait_closed(), 5)
        for conn in list(self.connections):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 5)
        # Each session reaps its command on the way out.
        if self.shell.sessions:
            await asyncio.wait(list(self.shell.sessions), timeout=5)


async def start_pod_server(
    shell: PodShell, host_key: asyncssh.SSHKey, client_key: asyncssh.SSHKey, host: str = "127.0.0.1"
) -> PodServer:
    """Listen on an ephemeral port of `host`, accepting only `client_key`."""
    connections: set[asyncssh.SSHServerConnection] = set()
    authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
    acceptor = await asyncssh.listen(
        host,
        0,
        server_factory=lambda: _TrackingServer(connections),
        server_host_keys=[host_key],
        authorized_client_keys=authorized,
        process_factory=shell.handle,
        encoding=None,
        agent_forwarding=False,
        allow_scp=False,
        x11_forwarding=False,
        login_timeout=30,
    )
    return PodServer(shell=shell, acceptor=acceptor, connections=connections)
