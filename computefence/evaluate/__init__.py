"""The evaluator: pure functions from a host's facts to findings, and from host reports to
a fleet verdict. Thresholds, provider knowledge and fix commands live here, so changing a
policy never needs a new probe on the pods.

Every rule is a function (facts, checks, ctx) -> list[Finding]; each area module lists its
rules in RULES and its check ids in CHECKS.
"""

from __future__ import annotations

import fnmatch

from computefence.errors import ConfigError
from computefence.evaluate import accelerate, gpu, python, storage, system
from computefence.evaluate.connection import status_fix
from computefence.evaluate.context import Rule, build_context
from computefence.evaluate.fleet import build_report, exit_code
from computefence.models import CheckOptions, Facts, Finding, ProviderInfo

RULES: list[Rule] = [
    *storage.RULES,
    *system.RULES,
    *gpu.RULES,
    *accelerate.RULES,
    *python.RULES,
    # Dataset checks (computefence/evaluate/dataset.py) register their rule function here.
]

# Every check id the rules can emit, with what it verifies (for --only/--skip and listings).
CHECKS: dict[str, str] = {
    **storage.CHECKS,
    **system.CHECKS,
    **gpu.CHECKS,
    **accelerate.CHECKS,
    **python.CHECKS,
    # ...and the dataset checks' ids here.
}
CHECK_IDS: frozenset[str] = frozenset(CHECKS)

__all__ = ["CHECKS", "CHECK_IDS", "RULES", "build_report", "evaluate_host", "exit_code", "select_findings", "status_fix"]


def evaluate_host(facts: Facts, checks: CheckOptions, provider: ProviderInfo | None = None) -> list[Finding]:
    """All findings for one host, passes included, in RULES order."""
    ctx = build_context(facts, checks, provider)
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(facts, checks, ctx))
    return findings


def _matches(check: str, pattern: str) -> bool:
    """An exact id, an area ('gpu' matches every gpu.* check) or a glob ('storage.*')."""
    if check == pattern or check.split(".", 1)[0] == pattern:
        return True
    return any(ch in pattern for ch in "*?[") and fnmatch.fnmatchcase(check, pattern)


def select_findings(findings: list[Finding], only: list[str], skip: list[str]) -> list[Finding]:
    """Findings of the --only checks (all when empty) minus the --skip ones. A pattern that
    names no known check is a ConfigError: a typo in --only must not turn a run green."""
    known = set(CHECKS) | {f.check for f in findings}
    for flag, patterns in (("--only", only), ("--skip", skip)):
        for pattern in patterns:
            if not any(_matches(check, pattern) for check in known):
                raise ConfigError(f"{flag} {pattern!r} names no check; known checks: {', '.join(sorted(CHECKS))}")
    kept = [f for f in findings if not only or any(_matches(f.check, p) for p in only)]
    return [f for f in kept if not any(_matches(f.check, p) for p in skip)]
