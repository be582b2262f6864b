"""Run fix steps on a target: over SSH (one connection per pod, a channel per step, with the
probe's keys, host-key checks and timeouts) or on this machine (`doctor --fix`).

A step is a command line the evaluator built (every pod value in it shell-quoted). It runs
under the pod's `timeout` where there is one, so a step past its limit is killed on the pod
itself; Ctrl-C sends it TERM. Output (stdout and stderr together) keeps its last 64 KiB.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from computefence.text import one_line

if TYPE_CHECKING:  # asyncssh loads only when pods are contacted
    from asyncssh import SSHClientConnection


MAX_STEP_OUTPUT = 64 * 1024
# GNU/busybox `timeout`: 124 when it stopped the command, 137 when it had to KILL it.
_TIMEOUT_EXITS = (124, 137)
# Seconds a step gets after TERM (timeout's -k, and Ctrl-C) before it is killed.
_GRACE_S = 5


@dataclass
class StepRun:
    """What one step did. `exit` is None where it has none (timed out, interrupted, lost)."""

    exit: int | None
    output: bytes
    duration_s: float
    timed_out: bool = False
    interrupted: bool = False
    # Why the connection is gone, when it dropped during the step.
    lost: str | None = None


class Shell(Protocol):
    async def run(self, command: str, timeout_s: float, stop: asyncio.Event) -> StepRun: ...

    async def close(self) -> None: ...


def bounded_command(command: str, timeout_s: float) -> str:
    """`command` under the pod's `timeout` (TERM at the limit) where it has one, with stdin from
    /dev/null, stopped (TERM) when the session's stdin closes or the session gets TERM: not
    every sshd passes signals on ("session signalling requires privilege separation"), and
    closing a channel without a terminal leaves its processes running. GNU `timeout` passes
    the TERM to its whole process group but waits only for its own child: a process of the
    step that ignores TERM outlives it. So once the step was stopped or timed out, what is
    left of its group gets KILL after the grace. Only the integer limit and the quoted command
    are formatted in."""
    limit = max(1, int(timeout_s))
    return (
        f"exec 3<&0; if timeout -k {_GRACE_S} 1 true >/dev/null 2>&1; then t='timeout -k {_GRACE_S} {limit}'; "
        f"else t=; fi; $t sh -c {shlex.quote(command)} </dev/null & pid=$!; stopped=; "
        "trap 'stopped=1; kill -TERM $pid 2>/dev/null' TERM; "
        "( read -r _ <&3; kill -TERM $$ 2>/dev/null ) & w=$!; "
        # A trapped TERM ends `wait` early: wait again until the step is gone.
        "wait $pid; s=$?; while kill -0 $pid 2>/dev/null; do wait $pid; s=$?; done; kill $w 2>/dev/null; "
        f'if [ -n "$stopped" ] || [ $s = 124 ]; then n=0; '
        f"while kill -0 -$pid 2>/dev/null && [ $n -lt {_GRACE_S} ]; do sleep 1; n=$((n+1)); done; "
        "kill -KILL -$pid 2>/dev/null; fi; exit $s"
    )


class _Tail:
    """The last MAX_STEP_OUTPUT bytes of a stream."""

    def __init__(self) -> None:
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > MAX_STEP_OUTPUT:
            del self.data[: len(self.data) - MAX_STEP_OUTPUT]


async def _drain(stream: Any, tail: _Tail) -> None:
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return
        tail.add(chunk if isinstance(chunk, bytes) else chunk.encode())


async def _wait_or_stop(done: asyncio.Future[Any], timeout_s: float, stop: asyncio.Event) -> str:
    """'done', 'timeout' or 'stop', whichever comes first."""
    stopper = asyncio.ensure_future(stop.wait())
    try:
        finished, _ = await asyncio.wait({done, stopper}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if done in finished:
        return "done"
    return "stop" if stop.is_set() else "timeout"


class SshShell:
    """Steps on one pod over one SSH connection."""

    def __init__(self, conn: SSHClientConnection) -> None:
        self.conn = conn

    async def run(self, command: str, timeout_s: float, stop: asyncio.Event) -> StepRun:
        from computefence.connectors.asyncssh_quiet import asyncssh

        started = time.monotonic()
        tail = _Tail()
        try:
            proc = await self.conn.create_process(
                bounded_command(command, timeout_s), encoding=None, stderr=asyncssh.STDOUT
            )
            # stdin stays open: its end is how the pod-side wrapper learns to stop the step.
            drain = asyncio.ensure_future(_drain(proc.stdout, tail))
            finished = asyncio.ensure_future(proc.wait())
            # The pod's own `timeout` answers first; this bound is for a pod without one.
            how = await _wait_or_stop(finished, timeout_s + _GRACE_S + 2, stop)
            if how != "done":
                _terminate(proc)
                try:
                    await asyncio.wait_for(asyncio.shield(finished), _GRACE_S + 1)
                except asyncio.TimeoutError:
                    proc.close()
                drain.cancel()
                return _cut_short(how, tail, started)
            completed = finished.result()
            await asyncio.wait_for(drain, 5)
        except (asyncssh.DisconnectError, asyncssh.ConnectionLost, ConnectionError, BrokenPipeError) as exc:
            return StepRun(None, bytes(tail.data), time.monotonic() - started, lost=_reason(exc))
        except asyncssh.ChannelOpenError as exc:
            return StepRun(
                None, bytes(tail.data), time.monotonic() - started, lost=f"the pod refused a channel: {_reason(exc)}"
            )
        except asyncio.TimeoutError:
            completed = None
        duration = time.monotonic() - started
        if completed is None or (completed.exit_status is None and completed.exit_signal is None):
            return StepRun(None, bytes(tail.data), duration, lost="the connection dropped during the step")
        if completed.exit_status in _TIMEOUT_EXITS and duration >= timeout_s:
            return StepRun(completed.exit_status, bytes(tail.data), duration, timed_out=True)
        exit_status = completed.exit_status if completed.exit_status is not None else 128 + 15
        return StepRun(exit_status, bytes(tail.data), duration)

    async def close(self) -> None:
        self.conn.abort()
        await self.conn.wait_closed()


def _terminate(proc: Any) -> None:
    """TERM to the step: as a signal request where sshd honours one, and by closing its stdin,
    which the pod-side wrapper answers with TERM to `timeout` and so to the step's group."""
    for stop in (lambda: proc.send_signal("TERM"), proc.stdin.write_eof):
        try:
            stop()
        except Exception:  # an sshd that refuses signal requests, a channel already closed
            pass


def _cut_short(how: str, tail: _Tail, started: float) -> StepRun:
    """The run of a step ended by its deadline ("timeout") or by the run's stop ("stop")."""
    return StepRun(
        None, bytes(tail.data), time.monotonic() - started, timed_out=how == "timeout", interrupted=how == "stop"
    )


def _reason(exc: BaseException) -> str:
    return one_line(str(getattr(exc, "reason", None) or exc) or type(exc).__name__, 200)


class LocalShell:
    """Steps on this machine, for `doctor --fix`: sh -c in its own process group."""

    async def run(self, command: str, timeout_s: float, stop: asyncio.Event) -> StepRun:
        started = time.monotonic()
        tail = _Tail()
        proc = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        drain = asyncio.ensure_future(_drain(proc.stdout, tail))
        finished = asyncio.ensure_future(proc.wait())
        how = await _wait_or_stop(finished, timeout_s, stop)
        if how != "done":
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(finished), _GRACE_S)
            except asyncio.TimeoutError:
                _kill_group(proc.pid, signal.SIGKILL)
                await finished
            drain.cancel()
            return _cut_short(how, tail, started)
        await drain
        code = finished.result()
        return StepRun(code if code >= 0 else 128 - code, bytes(tail.data), time.monotonic() - started)

    async def close(self) -> None:
        return None


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
