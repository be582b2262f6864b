"""Run the probe on Slurm nodes as job steps: one `srun` per node, in parallel.

One step per node, not one step over many: a node whose slurmd died before the controller
noticed kills a whole multi-node step (no output from any node), where it costs a one-node
step only its own node. Every step has `--immediate`, so a node that is busy, drained or
reserved answers within that bound instead of queueing; the client's deadline stops a step
whose probe hangs (Slurm enforces `--time` only about once a minute). The command is an
argv, never a shell string: the node name is one argument, the probe travels on stdin.

Account, QOS and partition come from the options, else srun reads Slurm's own input
variables (SLURM_ACCOUNT, SLURM_QOS, SLURM_PARTITION) from the environment it inherits.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from computefence.connectors.interface import Outcome, host_report, read_capped
from computefence.connectors.payload import MAX_OUTPUT_BYTES, parse_probe_output
from computefence.connectors.shell import Shell
from computefence.errors import ProbeOutputError
from computefence.models import HostReport, HostStatus, Target
from computefence.probe.assemble import BOOTSTRAP, probe_wire
from computefence.text import one_line

MAX_STDERR_BYTES = 64 * 1024
# srun cancels a step on a second SIGINT within one second; past this it is killed.
_STOP_GRACE_S = 5.0

# srun's words (22.05 and later) for what kept a step from starting, and what each means.
_BUSY = ("Requested nodes are busy", "queued and waiting for resources")
_UNAVAILABLE = (
    "Required node not available",
    "Requested node configuration is not available",
    "Nodes required for job are DOWN",
)
_LAUNCH_FAILED = ("Task launch for", "Application launch failed", "Communication connection failure")


@dataclass(frozen=True)
class SlurmOptions:
    concurrency: int = 64
    # Everything for one node: getting the step, the probe, its answer.
    deadline: float = 60.0
    # srun --immediate: seconds to wait for resources before the node is called busy.
    immediate: int = 10
    account: str | None = None
    qos: str | None = None
    partitions: tuple[str, ...] = ()
    probe: str = "check"
    # `fleet resume`: the maintenance reservation the node is proven in.
    reservation: str | None = None


def srun_argv(target: Target, options: SlurmOptions, limit_s: float) -> list[str]:
    """The step that runs the probe on `target`'s node and nothing else; every value is one
    argument (`--opt=value`), so none can be read as another option."""
    minutes = max(1, math.ceil(limit_s / 60))
    argv = [
        "srun",
        f"--nodelist={target.host}",
        "--nodes=1",
        "--ntasks=1",
        f"--immediate={options.immediate}",
        f"--time={minutes}",
        "--job-name=computefence-probe",
        "--quiet",
    ]
    gpus = target.provider.gpu_count if target.provider is not None else None
    if gpus:
        # All of the node's GPUs, so the driver's view is the whole node's (ConstrainDevices
        # hides the others); a node whose GPUs a job holds is busy.
        argv.append(f"--gres=gpu:{gpus}")
    if options.account:
        argv.append(f"--account={options.account}")
    if options.qos:
        argv.append(f"--qos={options.qos}")
    if options.reservation:
        argv.append(f"--reservation={options.reservation}")
    if options.partitions:
        argv.append(f"--partition={','.join(options.partitions)}")
    return [*argv, target.python, "-B", "-c", BOOTSTRAP]


class SlurmConnector:
    """Each target is a node name; its report's `host` is the node, with no port."""

    def __init__(self, options: SlurmOptions):
        self.options = options
        self.semaphore = asyncio.Semaphore(options.concurrency)

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        async with self.semaphore:
            started = time.monotonic()
            try:
                outcome = await self._step(target, params)
            except Exception as exc:  # a bug here must cost this node its result, not the run's
                outcome = Outcome(
                    HostStatus.PROBE_FAILED, f"internal error: {type(exc).__name__}: {one_line(str(exc))}"
                )
            report = host_report(target, outcome, time.monotonic() - started)
            return report.model_copy(update={"port": None})

    async def open_shell(self, target: Target) -> Shell | Outcome:
        """No command session: a fix step on a node would need a job step of its own, and a
        broken node is drained (fleet drain), not repaired through the scheduler."""
        return Outcome(HostStatus.NOT_CHECKABLE, f"{target.name} is a Slurm node: fix steps do not run through srun")

    async def _step(self, target: Target, params: dict[str, Any]) -> Outcome:
        deadline = self.options.deadline
        # The probe answers before the client gives up; what it could not finish it reports as timed out.
        params = dict(params)
        params["deadline_s"] = round(max(0.5, deadline - self.options.immediate - min(5.0, deadline * 0.2)), 1)
        payload = probe_wire(params, self.options.probe)
        try:
            proc = await asyncio.create_subprocess_exec(
                *srun_argv(target, self.options, deadline),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # Ctrl-C reaches the run, which stops each srun itself (so the step is cancelled).
                start_new_session=True,
            )
        except FileNotFoundError:
            return Outcome(HostStatus.NOT_CHECKABLE, "srun is not on PATH on this machine")
        try:
            stdout, stderr, overflow = await asyncio.wait_for(_communicate(proc, payload), deadline)
        except asyncio.TimeoutError:
            await _stop(proc)
            return Outcome(
                HostStatus.TIMEOUT,
                f"the probe gave no answer within the {deadline:g} s deadline; its step was cancelled",
            )
        except BaseException:
            await _stop(proc)
            raise
        if overflow:
            await _stop(proc)
            return Outcome(HostStatus.PROBE_FAILED, overflow)
        return judge_step(proc.returncode, stdout, stderr, target, self.options)


async def _communicate(proc: asyncio.subprocess.Process, payload: bytes) -> tuple[bytes, bytes, str | None]:
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(payload)
        await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # srun already exited (no allocation); its status and stderr say why
    out_task = asyncio.ensure_future(read_capped(proc.stdout, MAX_OUTPUT_BYTES))
    err_task = asyncio.ensure_future(read_capped(proc.stderr, MAX_STDERR_BYTES))
    try:
        await asyncio.wait({out_task, err_task}, return_when=asyncio.FIRST_COMPLETED)
        for task, what in ((out_task, f"{MAX_OUTPUT_BYTES // (1024 * 1024)} MiB"), (err_task, "64 KiB on stderr")):
            if task.done() and task.result()[1]:
                return b"", b"", f"the step printed more than {what}; that is not the probe's answer"
        stdout, out_over = await out_task
        stderr, err_over = await err_task
    finally:
        out_task.cancel()
        err_task.cancel()
        await asyncio.gather(out_task, err_task, return_exceptions=True)
    if out_over or err_over:
        return b"", b"", "the step printed more than the probe's answer can be"
    await proc.wait()
    return stdout, stderr, None


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Cancel the step: srun ends it on a second SIGINT within a second; kill srun past the grace.

    Its pipes are read (and dropped) meanwhile: asyncio counts a process as exited only once its
    pipes reach end of file, which a reader paused on a full buffer never sees."""
    drains = [asyncio.ensure_future(_drop(stream)) for stream in (proc.stdout, proc.stderr) if stream is not None]
    try:
        if proc.returncode is None:
            for _ in range(2):
                _signal(proc.pid, signal.SIGINT)
                await asyncio.sleep(0.2)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), _STOP_GRACE_S)
        except asyncio.TimeoutError:
            _signal(proc.pid, signal.SIGKILL)
            await proc.wait()
    finally:
        for drain in drains:
            drain.cancel()


async def _drop(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


def _signal(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _srun_errors(stderr: bytes) -> list[str]:
    return [
        line.strip()
        for line in stderr.decode("utf-8", "replace").splitlines()
        if line.strip().startswith(("srun:", "slurmstepd"))
    ]


def judge_step(returncode: int | None, stdout: bytes, stderr: bytes, target: Target, options: SlurmOptions) -> Outcome:
    """The outcome of one node's step from srun's exit status and words."""
    lines = _srun_errors(stderr)
    said = "\n".join(lines)
    last = one_line(lines[-1], 200) if lines else ""
    if returncode != 0:
        if any(words in said for words in _BUSY):
            return Outcome(
                HostStatus.NOT_CHECKABLE,
                f"busy: Slurm had no free resources on {target.host} within --immediate={options.immediate}s"
                + (
                    f" (asked for gpu:{target.provider.gpu_count})"
                    if target.provider and target.provider.gpu_count
                    else ""
                ),
                detail="busy",
            )
        if any(words in said for words in _UNAVAILABLE):
            return Outcome(HostStatus.NOT_CHECKABLE, f"Slurm will not start a step there now: {_after_error(last)}")
        if any(words in said for words in _LAUNCH_FAILED):
            return Outcome(HostStatus.UNREACHABLE, f"the step could not start on the node: {_after_error(last)}")
        if "execve():" in said and "No such file" in said:
            return Outcome(HostStatus.NO_PYTHON, f"{target.python} is not on the node's PATH ({_after_error(last)})")
        if "Unable to allocate resources" in said or "Invalid" in said:
            return Outcome(HostStatus.NOT_CHECKABLE, f"srun could not get an allocation: {_after_error(last)}")
    try:
        facts = parse_probe_output(stdout, options.probe)
    except ProbeOutputError as exc:
        why = str(exc)
        if returncode:
            why += f" (srun exit status {returncode}{': ' + _after_error(last) if last else ''})"
        return Outcome(HostStatus.PROBE_FAILED, why)
    return Outcome(HostStatus.OK, "probe completed", facts=facts)


def _after_error(line: str) -> str:
    for marker in ("error: ", "srun: "):
        if marker in line:
            line = line.split(marker, 1)[1]
    return line
