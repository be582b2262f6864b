"""A run's targets probed in worker processes (`fleet check --workers N`).

The SSH handshake costs client CPU per pod, so one process checks pods on one core however
lean the code around it is. The targets split as `--shard I/N` splits them (a stable hash
of each name). Each worker is a fork of the session's process, taken before any event loop
runs there, so it reaches the pods through the session's own connector and settings; it
probes its slice and sends each pod's HostReport back as it finishes. The session counts
progress as they come, puts them back in the plan's order and judges them once, so the
report is the one a single process gives (fleet-wide findings see every pod, which a
`report merge` of shard reports can only approximate).

Ctrl-C reaches every process of the terminal's group: the workers ignore it and stop when
the session tells them (or when it is gone), each reporting what it had not finished as
cancelled. A worker that dies leaves its unfinished pods probe_failed, saying so; the other
pods' results stand.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from computefence.connectors.interface import Connector, Outcome, cancelled_report, check_targets, host_report
from computefence.connectors.shell import Shell
from computefence.models import HostReport, HostStatus, Target
from computefence.sources.selection import shard_of

if TYPE_CHECKING:  # multiprocessing is imported when workers start (a run in one process needs none of it)
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["Workers", "default_workers", "start_workers"]

# The message that tells a worker to stop: what it had not finished is reported cancelled.
_STOP = "stop"
# How long a worker that has said all it has may take to exit before it is killed.
_EXIT_GRACE_S = 5.0


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as taskset and cgroups set it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        return os.cpu_count() or 1


def default_workers(targets: int) -> int:
    """--workers when not given: the usable cores, no more than there are targets."""
    return max(1, min(usable_cores(), targets))


def can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    targets: list[Target]
    said_done: bool = False
    failure: str | None = None
    ended: bool = False


@dataclass
class Workers:
    """Worker processes started on slices of a run's targets, collected by `gather`."""

    targets: list[Target]
    workers: list[_Worker] = field(default_factory=list)

    async def gather(self, on_progress: Callable[[HostReport], None] | None, stop: asyncio.Event) -> list[HostReport]:
        """Every target's HostReport, in the targets' order, as the workers send them;
        setting `stop` tells each worker to stop. The workers have exited on return."""
        loop = asyncio.get_running_loop()
        received: dict[str, HostReport] = {}
        all_ended = asyncio.Event()

        def end(worker: _Worker) -> None:
            if not worker.ended:
                worker.ended = True
                loop.remove_reader(worker.conn.fileno())
                if all(w.ended for w in self.workers):
                    all_ended.set()

        def readable(worker: _Worker) -> None:
            try:
                kind, value = worker.conn.recv()
            except (EOFError, OSError):
                end(worker)
                return
            except Exception as exc:  # a message cut off by the worker's death
                worker.failure = f"its message could not be read ({type(exc).__name__})"
                end(worker)
                return
            if kind == "host":
                received[value.name] = value
                if on_progress is not None:
                    on_progress(value)
            elif kind == "done":
                for host in value:
                    received[host.name] = host
                worker.said_done = True
            else:
                worker.failure = str(value)

        for worker in self.workers:
            loop.add_reader(worker.conn.fileno(), readable, worker)
        if not self.workers:
            all_ended.set()
        stopping = asyncio.ensure_future(stop.wait())
        ending = asyncio.ensure_future(all_ended.wait())
        try:
            await asyncio.wait({stopping, ending}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                for worker in self.workers:
                    if not worker.ended:
                        _tell(worker.conn, _STOP)
            await ending
        finally:
            stopping.cancel()
            ending.cancel()
            for worker in self.workers:
                end(worker)
            await asyncio.to_thread(self._reap)
        return [received.get(t.name) or self._unanswered(t, stop.is_set()) for t in self.targets]

    def _unanswered(self, target: Target, stopped: bool) -> HostReport:
        """A target no worker answered for: cancelled by the stop, or its worker died."""
        if stopped:
            return cancelled_report(target)
        worker = next(w for w in self.workers if any(t.name == target.name for t in w.targets))
        why = worker.failure or f"exit status {worker.process.exitcode}"
        reason = f"the worker process checking this pod ended before it finished ({why})"
        return host_report(target, Outcome(HostStatus.PROBE_FAILED, reason), 0.0)

    def _reap(self) -> None:
        for worker in self.workers:
            worker.process.join(_EXIT_GRACE_S)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()


def _tell(conn: Connection, message: str) -> None:
    try:
        conn.send(message)
    except OSError:  # it has exited already
        pass


def start_workers(
    targets: Sequence[Target],
    count: int,
    connector: Connector,
    probe_params: dict[str, Any] | None,
    concurrency: int | None = None,
) -> Workers:
    """Up to `count` worker processes, each probing its slice of `targets` through
    `connector`; `concurrency` (--concurrency) bounds the pods in flight across all of
    them, as in one process. Call it outside any running event loop: each worker starts
    its own."""
    if concurrency is not None:
        count = max(1, min(count, concurrency))
    parts = [p for p in ([t for t in targets if shard_of(t.name, count) == i] for i in range(1, count + 1)) if p]
    import multiprocessing

    context = multiprocessing.get_context("fork")
    started = Workers(list(targets))
    # What this process has buffered would otherwise be written again by every fork.
    sys.stdout.flush()
    sys.stderr.flush()
    # A Ctrl-C waits while the workers are forked (the parent acts on it once they run): in a
    # worker that has not yet set it aside, it would end in a traceback.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    # What the session holds now (its imports, the targets) stays shared with the workers:
    # a worker's collector would otherwise write to every object's header, copying its page.
    gc.freeze()
    try:
        for index, part in enumerate(parts):
            share = None if concurrency is None else concurrency // len(parts) + (index < concurrency % len(parts))
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_work,
                # The parent's ends, closed in the worker: it sees EOF when the parent is gone.
                args=(
                    theirs,
                    [ours, *(w.conn for w in started.workers)],
                    connector,
                    part,
                    probe_params,
                    share,
                    blocked,
                ),
                name=f"computefence-worker-{index + 1}",
                daemon=True,
            )
            process.start()
            theirs.close()
            started.workers.append(_Worker(process, ours, part))
    finally:
        gc.unfreeze()
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return started


class _InFlight:
    """A worker's connector, with at most its share of the run's --concurrency in flight."""

    def __init__(self, connector: Connector, share: int):
        self.connector = connector
        self.share = share
        self.semaphore: asyncio.Semaphore | None = None

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        if self.semaphore is None:  # made in the worker's own event loop
            self.semaphore = asyncio.Semaphore(self.share)
        async with self.semaphore:
            return await self.connector.check(target, params)

    async def open_shell(self, target: Target) -> Shell | Outcome:
        return await self.connector.open_shell(target)


class _Forwarding:
    """A worker's connector: each pod's report goes to the session as soon as it is made, and
    the worker keeps only a stand-in, so its memory stays that of the pods in flight."""

    def __init__(self, connector: Connector, send: Callable[[HostReport], None]):
        self.connector = connector
        self.send = send

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        self.send(await self.connector.check(target, params))
        return HostReport(name=target.name, status=HostStatus.OK)

    async def open_shell(self, target: Target) -> Shell | Outcome:
        return await self.connector.open_shell(target)


def _work(
    conn: Connection,
    parents_ends: list[Connection],
    connector: Connector,
    targets: list[Target],
    probe_params: dict[str, Any] | None,
    share: int | None,
    mask: set[signal.Signals],
) -> None:
    """A worker's whole life: its slice probed, each result sent as it finishes."""
    # The terminal's Ctrl-C is the session's to act on; it tells this worker to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for end in parents_ends:
        end.close()
    if share is not None:
        connector = _InFlight(connector, share)
    try:
        asyncio.run(_probe_slice(conn, connector, targets, probe_params))
    except BaseException as exc:  # said to the session in one line, never a traceback here
        _tell_failure(conn, f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
        os._exit(1)


def _tell_failure(conn: Connection, line: str) -> None:
    try:
        conn.send(("failed", line))
    except OSError:
        pass


async def _probe_slice(
    conn: Connection, connector: Connector, targets: list[Target], probe_params: dict[str, Any] | None
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def told() -> None:
        # A stop message, or the session gone (EOF): either way this worker stops.
        try:
            conn.recv()
        except (EOFError, OSError):
            pass
        loop.remove_reader(conn.fileno())
        stop.set()

    loop.add_reader(conn.fileno(), told)
    sent: set[str] = set()

    def send(host: HostReport) -> None:
        if host.name not in sent:  # a target check_targets answers itself (not checkable)
            conn.send(("host", host))
            sent.add(host.name)

    hosts = await check_targets(_Forwarding(connector, send), targets, probe_params, on_progress=send, stop=stop)
    if not stop.is_set():
        loop.remove_reader(conn.fileno())
    conn.send(("done", [h for h in hosts if h.name not in sent]))
