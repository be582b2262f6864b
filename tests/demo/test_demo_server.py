"""The in-process SSH server behind the demo pods: real commands, real environment, sshd's hangup."""

from __future__ import annotations

import ast
import asyncio
import os
import time

import asyncssh
import pytest

from computefence.demo.server import PodShell, start_pod_server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent has not reaped it yet.
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] != "Z"


async def _with_server(tmp_path, body):
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    shell = PodShell(env={"PATH": "/usr/bin:/bin", "POD_MARK": "pod-7"}, cwd=str(tmp_path))
    server = await start_pod_server(shell, host_key, client_key)
    known = asyncssh.import_known_hosts(f"[127.0.0.1]:{server.port} {host_key.export_public_key().decode()}")
    try:
        async with asyncssh.connect(
            "127.0.0.1", server.port, known_hosts=known, client_keys=[client_key], username="root"
        ) as conn:
            return await body(conn, shell)
    finally:
        await server.close()


def test_exec_runs_the_command_with_stdin_env_and_cwd(tmp_path):
    async def body(conn, shell):
        return await conn.run(
            'python3 -c \'import os, sys; print(len(sys.stdin.read()), os.environ["POD_MARK"], os.getcwd(), '
            "sorted(os.environ))'; echo err >&2; exit 3",
            input="x" * 300_000,
        )

    result = asyncio.run(_with_server(tmp_path, body))
    assert result.exit_status == 3
    assert result.stdout.split(" ", 3)[:3] == ["300000", "pod-7", str(tmp_path)]
    # Only the pod's own environment, nothing of the process running the demo (sh adds PWD,
    # python's locale coercion LC_CTYPE).
    names = set(ast.literal_eval(result.stdout.split(" ", 3)[3]))
    assert names - {"PWD", "LC_CTYPE"} == {"PATH", "POD_MARK"}
    assert result.stderr == "err\n"


def test_a_command_killed_by_a_signal_reports_the_signal(tmp_path):
    async def body(conn, shell):
        return await conn.run("kill -TERM $$")

    result = asyncio.run(_with_server(tmp_path, body))
    assert result.exit_status == -1
    assert result.exit_signal[0] == "TERM"


def test_closing_the_channel_kills_the_command_and_its_children(tmp_path):
    pid_file = tmp_path / "pids"

    async def body(conn, shell):
        process = await conn.create_process(f"sleep 60 & echo $! $$ > {pid_file}; wait")
        deadline = time.monotonic() + 10
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the command never started"
            await asyncio.sleep(0.02)
        process.close()
        await process.wait_closed()
        deadline = time.monotonic() + 10
        pids = [int(p) for p in pid_file.read_text().split()]
        while any(_alive(p) for p in pids) or shell.running:
            assert time.monotonic() < deadline, "the command outlived its channel"
            await asyncio.sleep(0.02)
        return pids

    pids = asyncio.run(_with_server(tmp_path, body))
    assert len(pids) == 2


def test_a_shell_request_is_refused_with_a_message(tmp_path):
    async def body(conn, shell):
        process = await conn.create_process(term_type=None)
        return await process.wait()

    result = asyncio.run(_with_server(tmp_path, body))
    assert result.exit_status == 1
    assert "exec requests only" in result.stderr


def test_an_unknown_client_key_is_refused(tmp_path):
    host_key = asyncssh.generate_private_key("ssh-ed25519")

    async def run():
        shell = PodShell(env={}, cwd=str(tmp_path))
        server = await start_pod_server(shell, host_key, asyncssh.generate_private_key("ssh-ed25519"))
        try:
            with pytest.raises(asyncssh.PermissionDenied):
                await asyncssh.connect(
                    "127.0.0.1",
                    server.port,
                    known_hosts=None,
                    username="root",
                    client_keys=[asyncssh.generate_private_key("ssh-ed25519")],
                    agent_path=None,
                )
        finally:
            await server.close()

    asyncio.run(run())
