"""The fleet-wide steps (env.outlier and env.drift across pods, perf beside the fleet median,
version drift), each run so that one pod's facts cannot crash the run.

A rule that trips on one pod's facts makes that pod probe_failed (judge_host). A fleet-wide
step looks at every pod at once, so one pod's odd facts would end the run without a report
for anyone. `run_fleet_step` runs the step; where it raises, it finds the pods whose facts
break it (halving the fleet, the half that still fails holding them, the other half's pods
kept as peers), makes each of them probe_failed naming the step and the error, and runs the
step over the others. A failure that no pod explains (the step still fails without them, or
most of the fleet would be blamed) blames nobody: the step's `fallback`, with the error, for
the caller to report as unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from computefence.models import HostReport, HostStatus
from computefence.text import one_line

T = TypeVar("T")


@dataclass(frozen=True)
class FleetStep(Generic[T]):
    result: T
    # The hosts, in order, those whose facts broke the step made probe_failed.
    hosts: list[HostReport]
    # Why the step gave its fallback (no pod alone explains its failure); None when it ran.
    error: str | None = None


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {one_line(exc, 160)}"


def _breaks(step: Callable[[list[HostReport]], object], hosts: list[HostReport]) -> str | None:
    try:
        step(hosts)
    except Exception as exc:  # a pod's value the step did not foresee
        return _error(exc)
    return None


def _culprits(
    step: Callable[[list[HostReport]], object], suspects: list[HostReport], peers: list[HostReport], error: str
) -> dict[str, str]:
    """Pod name -> the error, for the pods among `suspects` whose facts break `step` (which
    fails over suspects + peers with `error`). `peers` do not break it."""
    if len(suspects) == 1:
        return {suspects[0].name: error}
    middle = len(suspects) // 2
    halves = (suspects[:middle], suspects[middle:])
    errors = [_breaks(step, half + peers) for half in halves]
    found: dict[str, str] = {}
    for index, (half, half_error) in enumerate(zip(halves, errors)):
        other = halves[1 - index]
        if half_error is not None:
            known_good = other if errors[1 - index] is None else []
            found |= _culprits(step, half, peers + known_good, half_error)
    return found


def run_fleet_step(
    name: str, hosts: list[HostReport], step: Callable[[list[HostReport]], T], fallback: T
) -> FleetStep[T]:
    """`step(hosts)`, or, where one pod's facts break it, that pod probe_failed and the step
    over the others; `name` says which step in the pod's reason."""
    try:
        return FleetStep(step(hosts), hosts)
    except Exception as exc:  # a pod's value the step did not foresee
        error = _error(exc)
    culprits = _culprits(step, hosts, [], error)
    checked = sum(1 for h in hosts if h.status is HostStatus.OK and h.facts is not None)
    # Most of the fleet "breaking" a step is the step failing, not the pods' facts.
    if culprits and len(culprits) * 2 <= checked:
        try:
            result = step([h for h in hosts if h.name not in culprits])
        except Exception:  # they do not explain it: nobody is blamed
            pass
        else:
            return FleetStep(
                result,
                [
                    unjudged(h, f"{name} across the fleet: {culprits[h.name]}") if h.name in culprits else h
                    for h in hosts
                ],
            )
    return FleetStep(fallback, hosts, error)


def unjudged(host: HostReport, why: str) -> HostReport:
    """`host` made probe_failed because its facts broke a rule or step, `why` naming it."""
    return host.model_copy(
        update={
            "status": HostStatus.PROBE_FAILED,
            "reason": f"its answer could not be judged ({why})",
            "facts": None,
            "findings": [],
        }
    )
