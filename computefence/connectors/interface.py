"""What every way of reaching a machine promises: a target and its probe parameters in, one
HostReport out (status, facts, timing).

Connectors: local (this machine, `doctor`), ssh (asyncssh, `fleet check`) and replay
(recorded probe outputs, so the whole CLI runs without any server). A connector never raises
for a machine's fault: every failure is the report's status with a one-line reason, and
nothing that happens on one target reaches another.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from computefence.connectors.payload import probe_params
from computefence.models import Facts, HostReport, HostStatus, SourceStatus, Target

if TYPE_CHECKING:
    from computefence.connectors.shell import Shell

# The detail a connector gives with HOST_KEY_MISMATCH when the key is @revoked, not changed.
REVOKED_DETAIL = "@revoked"
# The detail of a connection_lost that happened before the login, not while the probe ran.
HANDSHAKE = "handshake"

_Own = TypeVar("_Own")


class _Stream(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


async def read_capped(stream: _Stream, cap: int) -> tuple[bytes, bool]:
    """A command's output up to its end, and whether it went past `cap` bytes (then what was
    read is no answer and reading stops there)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return b"".join(chunks), False
        size += len(chunk)
        if size > cap:
            return b"".join(chunks), True
        chunks.append(chunk)


@dataclass(frozen=True)
class ConnectSettings:
    """How a run reaches its targets: what every connector honours, and each connector's own
    settings (an object of the class its row declares, e.g. SshSettings or ReplaySettings)."""

    # Targets worked on at once.
    concurrency: int = 256
    # Time to connect, handshake and log in.
    connect_timeout: float = 10.0
    # Everything for one target, connecting included (local: the probe process's bound).
    deadline: float = 60.0
    # Which probe to send (probe.assemble.PROBES): "check", or "watch" (fleet watch).
    probe: str = "check"
    own: tuple[object, ...] = ()

    def of(self, kind: type[_Own]) -> _Own:
        """The settings of class `kind` given, else that class's defaults."""
        return next((item for item in self.own if isinstance(item, kind)), None) or kind()

    def with_own(self, *settings: object) -> ConnectSettings:
        """These settings with `settings` in place of any of the same class."""
        kept = tuple(item for item in self.own if not any(type(item) is type(new) for new in settings))
        return replace(self, own=kept + settings)


class Connector(Protocol):
    """How a run reaches one kind of machine: the probe on a target, and a command session."""

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        """The target's facts, or the status saying why there are none (never a fix: the
        evaluator words it)."""

    async def open_shell(self, target: Target) -> Shell | Outcome:
        """A session that runs bounded commands on the target (fix steps), or the outcome
        saying why there is none."""


@dataclass
class Session:
    """An open connector: it makes the Connector for the targets, and lists its own pods
    where it brings them (demo, replay)."""

    connect: Callable[[list[Target]], Connector]
    # The connector's own pods and their source; None: the caller's targets.
    targets: list[Target] | None = None
    sources: list[SourceStatus] = field(default_factory=list)
    # Real pods: a provider pod that failed to answer is worth re-listing (run.mark_vanished).
    live: bool = True


class ConnectorKind(Protocol):
    """One row of connectors.registry.CONNECTORS: a way of reaching machines."""

    @property
    def settings(self) -> type:
        """The class of this connector's own settings (ConnectSettings.of finds them)."""

    def open(self, settings: ConnectSettings) -> AbstractContextManager[Session]:
        """The connector's session, open while the block runs."""

    def reaches(self, target: Target) -> bool:
        """Whether this connector is the one for `target` when a command names none."""

    @property
    def address(self) -> Callable[[Target], str]:
        """How a target it reaches is reached, as one would type it."""


@dataclass
class Outcome:
    status: HostStatus
    reason: str
    # For the evaluator's fix, when the reason is not what it needs: the known_hosts file
    # holding the old key (mismatch), the offered key's fingerprint (unknown), HANDSHAKE.
    detail: str | None = None
    facts: Facts | None = None


def host_report(target: Target, outcome: Outcome, duration: float) -> HostReport:
    """The report of one target's outcome, without a fix: run.probe_targets has the
    evaluator word it from the status and `status_detail`."""
    report = HostReport(
        name=target.name,
        status=outcome.status,
        reason=outcome.reason,
        host=target.host,
        port=target.port,
        provider=target.provider,
        tags=list(target.tags),
        duration_s=round(duration, 3),
        facts=outcome.facts,
    )
    if outcome.status is not HostStatus.OK:
        report.status_detail = outcome.detail if outcome.detail is not None else outcome.reason
    return report


def cancelled_report(target: Target) -> HostReport:
    return host_report(target, Outcome(HostStatus.CANCELLED, "interrupted before this pod finished"), 0.0)


def target_params(target: Target, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The probe parameters for one target: its checks, its interpreter, its probe roots."""
    params = probe_params(target.checks, target.python, **(extra or {}))
    if target.probe_roots:
        params["roots"] = dict(target.probe_roots)
    # What a policy adds for this target (custom checks and their parameters).
    params.update(target.probe_extra)
    return params


async def check_targets(
    connector: Connector,
    targets: list[Target],
    extra_params: dict[str, Any] | None = None,
    on_progress: Callable[[HostReport], None] | None = None,
    stop: asyncio.Event | None = None,
) -> list[HostReport]:
    """Check every target through `connector`; one HostReport per target, in the targets' order.

    `on_progress` is called with each report as it completes. When `stop` is set (Ctrl-C),
    targets still in flight are cancelled and reported as cancelled.
    """

    async def one(target: Target) -> HostReport:
        if target.unreachable_reason:
            report = host_report(target, Outcome(HostStatus.NOT_CHECKABLE, target.unreachable_reason), 0.0)
        else:
            report = await connector.check(target, target_params(target, extra_params))
        if on_progress is not None:
            on_progress(report)
        return report

    tasks = [asyncio.ensure_future(one(target)) for target in targets]
    if not tasks:
        return []
    waiter = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        pending = set(tasks)
        while pending:
            wait_on = pending | ({waiter} if waiter is not None else set())
            done, _ = await asyncio.wait(wait_on, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            if waiter is not None and waiter in done:
                break
    finally:
        unfinished = [task for task in tasks if not task.done()]
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.gather(*unfinished, return_exceptions=True)
        if waiter is not None:
            waiter.cancel()
    return [cancelled_report(target) if task.cancelled() else task.result() for target, task in zip(targets, tasks)]
