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
from dataclasses import dataclass
from typing import Any, Protocol

from computefence.connectors.payload import probe_params
from computefence.models import Facts, HostReport, HostStatus, Target


class Connector(Protocol):
    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        """The target's facts, or the status saying why there are none."""


@dataclass
class Outcome:
    status: HostStatus
    reason: str
    # For status_fix, when the reason is not what it needs: the known_hosts file holding the
    # old key (mismatch), the offered key's fingerprint (unknown).
    detail: str | None = None
    facts: Facts | None = None


def host_report(target: Target, outcome: Outcome, duration: float, connect_timeout: float | None = None) -> HostReport:
    """`connect_timeout`: the one the fix for a pod that did not answer names (default: the evaluator's)."""
    fix = None
    if outcome.status is not HostStatus.OK:
        # Imported here: `doctor` starts its probe before the evaluator has loaded.
        from computefence.evaluate.connection import DEFAULT_CONNECT_TIMEOUT, status_fix

        fix = status_fix(
            target,
            outcome.status,
            outcome.detail if outcome.detail is not None else outcome.reason,
            connect_timeout=DEFAULT_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout,
        )
    return HostReport(
        name=target.name,
        status=outcome.status,
        reason=outcome.reason,
        fix=fix,
        host=target.host,
        port=target.port,
        provider=target.provider,
        tags=list(target.tags),
        duration_s=round(duration, 3),
        facts=outcome.facts,
    )


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
