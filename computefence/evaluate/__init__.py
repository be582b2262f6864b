"""The evaluator: pure functions from a host's facts to findings, and from host reports to
a fleet verdict. Thresholds, provider knowledge and fix commands live here, so changing a
policy never needs a new probe on the pods.

Every rule is a function (facts, checks, ctx) -> list[Finding]. Each check area is a module
in `checks/` listing its rules in RULES and its checks in CHECKS, each id with a CheckSpec
(what it verifies, and its remedy: fix, config or replace); `checks/areas.py` is the one
table of them. The engine (`judge.py`) and the fleet-level steps (`fleet.py`,
`fleet_steps.py`) live beside it. Every finding leaves here carrying its check's remedy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from computefence.evaluate.checks.areas import AREAS
    from computefence.evaluate.connection import status_fix
    from computefence.evaluate.fleet import build_report, exit_code
    from computefence.evaluate.judge import (
        CHECK_IDS,
        CHECKS,
        RULES,
        evaluate_host,
        evaluate_watch,
        finish_hosts,
        judge_host,
        reapply_policy,
        remedy_of,
        select_findings,
        with_remedies,
    )
    from computefence.evaluate.judge import (
        JudgingError as JudgingError,
    )
    from computefence.evaluate.judge import (
        _finish as _finish,
    )
    from computefence.evaluate.spec import CheckSpec, Remedy

__all__ = [
    "AREAS",
    "CHECKS",
    "CHECK_IDS",
    "RULES",
    "CheckSpec",
    "Remedy",
    "build_report",
    "evaluate_host",
    "evaluate_watch",
    "exit_code",
    "finish_hosts",
    "judge_host",
    "reapply_policy",
    "remedy_of",
    "select_findings",
    "status_fix",
    "with_remedies",
]


# Besides __all__, what other evaluator modules import from the package.
_NAMES = frozenset([*__all__, "JudgingError", "_finish"])
# The module each name lives in, where that is not judge.py.
_HOMES = {
    "AREAS": "checks.areas",
    "CheckSpec": "spec",
    "Remedy": "spec",
    "build_report": "fleet",
    "exit_code": "fleet",
    "status_fix": "connection",
}


def __getattr__(name: str) -> Any:
    # The areas, their rules and the judging steps load on first use, not with the package:
    # a submodule alone (evaluate.connection) stays light, and `doctor` starts its probe
    # before paying for the rest.
    if name.startswith("__"):
        raise AttributeError(name)
    if name not in _NAMES:  # a submodule: `from computefence.evaluate import connection`
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES.get(name, 'judge')}"), name)
    globals()[name] = value
    return value
