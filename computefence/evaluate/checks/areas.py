"""The one table of check areas: each area's module, typed by the CheckArea protocol, and
its title. The engine judges with it (RULES in table order) and the renderers head findings
with it (titles, in table order); a new area is one module and one row here.

A check's area is its id up to the first dot (gpu.ecc: gpu). Where a module adds checks to
another area's ids (gpu_health adds gpu.*, job adds storage.* and gpu.*), its row has an id
and title of its own, and its findings are shown under the area their ids name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from computefence.evaluate.checks import (
    accelerate,
    custom,
    dataset,
    environment,
    gpu,
    gpu_health,
    gpu_perf,
    job,
    policy_rules,
    python,
    scheduler,
    storage,
    system,
    time_limits,
    watch_checks,
)
from computefence.evaluate.context import Rule
from computefence.evaluate.spec import CheckSpec


class CheckArea(Protocol):
    """What the engine reads of an area module."""

    @property
    def CHECKS(self) -> Mapping[str, CheckSpec]:  # every check id its findings may carry
        ...

    @property
    def RULES(self) -> Sequence[Rule]:
        """The rules that judge one host's facts alone; none where the area is judged another
        way (with the policy, across the fleet, from the watch probe)."""
        ...


@dataclass(frozen=True)
class Area:
    """A row of the table: the module that judges the area, and the title a report heads the
    area's findings with."""

    module: CheckArea
    title: str


# Rules run, and reports show areas, in this order.
AREAS: dict[str, Area] = {
    "storage": Area(storage, "Storage"),
    "system": Area(system, "System"),
    "gpu": Area(gpu, "GPU"),
    "gpu_health": Area(gpu_health, "GPU health"),
    "gpu_perf": Area(gpu_perf, "GPU performance"),
    "scheduler": Area(scheduler, "Scheduler"),
    "accelerate": Area(accelerate, "Accelerate"),
    "python": Area(python, "Python"),
    "probe": Area(time_limits, "Probe"),
    "dataset": Area(dataset, "Dataset"),
    "job": Area(job, "Job size"),
    # The policy's requirements and hardware (policy.*), then its own commands (custom.<id>).
    "policy": Area(policy_rules, "Policy"),
    "custom": Area(custom, "Custom checks"),
    # Judged across the fleet (evaluate.finish_hosts), not one host at a time.
    "env": Area(environment, "Environment"),
    # Judged only by `fleet watch` (evaluate_watch), from the watch probe's facts.
    "run": Area(watch_checks, "Run"),
}
_ORDER = {area: rank for rank, area in enumerate(AREAS)}


def area_of(check: str) -> str:
    """The area a check is shown under: its id up to the first dot."""
    return check.split(".", 1)[0]


def area_title(area: str) -> str:
    """The area's title; an area no row names (a report saved by another version) is its id."""
    row = AREAS.get(area)
    return row.title if row is not None else area.capitalize() or "Other"


def area_sort_key(area: str) -> tuple[int, str]:
    """Areas in table order, any other after them by name."""
    return (_ORDER.get(area, len(_ORDER)), area)
