"""Fleets of any size made of the demo's recorded pods (computefence/demo/recordings/fleet):
real probe output through the real evaluator, so the layout tests see what users see."""

from __future__ import annotations

import asyncio
from functools import cache

from computefence.connectors.replay import ReplayConnector, load_recordings
from computefence.demo import DEMO_RECORDING
from computefence.evaluate import build_report, evaluate_host, finish_hosts
from computefence.models import HostReport, HostStatus, Report
from computefence.run import probe_targets

GENERATED_AT = "2026-11-30T20:00:00+00:00"
# One pod alone is the one with the most to say: blockers, a warning, fixes with advice.
SINGLE = "pod-ephemeral-ckpt"


@cache
def _recorded() -> tuple[HostReport, ...]:
    recordings = load_recordings(DEMO_RECORDING)
    targets = [recording.target for recording in recordings]
    # As a run probes them: a pod not checked gets the evaluator's fix for its status.
    hosts = asyncio.run(probe_targets(targets, ReplayConnector(recordings)))
    for target, host in zip(targets, hosts):
        if host.status is HostStatus.OK:
            host.findings = evaluate_host(host.facts, target.checks, target.provider)
    return tuple(hosts)


def recorded_fleet(pods: int) -> Report:
    """`pods` pods cycling through the six recorded ones; copies get a number after the name."""
    recorded = _recorded()
    if pods == 1:
        hosts = [next(h for h in recorded if h.name == SINGLE)]
    else:
        hosts = []
        for i in range(pods):
            host = recorded[i % len(recorded)]
            copy = i // len(recorded)
            hosts.append(
                host if pods <= len(recorded) else host.model_copy(update={"name": f"{host.name}-{copy + 1:02d}"})
            )
    # The fleet-wide checks (env.outlier) as `fleet check` adds them.
    report = build_report(finish_hosts(hosts, {}, None, only=[], skip=[]), kind="fleet")
    return report.model_copy(update={"generated_at": GENERATED_AT})
