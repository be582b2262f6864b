"""The evaluator: pure functions from a host's facts to findings, and from host reports to
a fleet verdict. Thresholds, provider knowledge and fix commands live here, so changing a
policy never needs a new probe on the pods.

Every rule is a function (facts, checks, ctx) -> list[Finding]; each area module lists its
rules in RULES and its check ids in CHECKS.
"""

from __future__ import annotations

import fnmatch

from computefence.errors import ConfigError
from computefence.evaluate import accelerate, dataset, gpu, gpu_health, gpu_perf, python, storage, system
from computefence.evaluate.connection import status_fix
from computefence.evaluate.context import Rule, build_context, one_line
from computefence.evaluate.fleet import build_report, exit_code
from computefence.models import CheckOptions, Facts, Finding, ProviderInfo

RULES: list[Rule] = [
    *storage.RULES,
    *system.RULES,
    *gpu.RULES,
    *gpu_health.RULES,
    *gpu_perf.RULES,
    *accelerate.RULES,
    *python.RULES,
    *dataset.RULES,
]

# Every check id the rules can emit, with what it verifies (for --only/--skip and listings).
CHECKS: dict[str, str] = {
    **storage.CHECKS,
    **system.CHECKS,
    **gpu.CHECKS,
    **gpu_health.CHECKS,
    **gpu_perf.CHECKS,
    **accelerate.CHECKS,
    **python.CHECKS,
    **dataset.CHECKS,
}
CHECK_IDS: frozenset[str] = frozenset(CHECKS)

__all__ = ["CHECKS", "CHECK_IDS", "RULES", "build_report", "evaluate_host", "exit_code", "select_findings", "status_fix"]


def evaluate_host(facts: Facts, checks: CheckOptions, provider: ProviderInfo | None = None) -> list[Finding]:
    """All findings for one host, passes included, in RULES order."""
    ctx = build_context(facts, checks, provider)
    findings: list[Finding] = []
    for rule in RULES:
        findings.extend(rule(facts, checks, ctx))
    return [_single_line(f) for f in findings]


def _single_line(finding: Finding) -> Finding:
    # Paths and names come from the pod; a newline in one must not break a report line.
    if "\n" not in finding.message and "\n" not in (finding.fix or ""):
        return finding
    fix = one_line(finding.fix, None) if finding.fix else finding.fix
    return finding.model_copy(update={"message": one_line(finding.message, None), "fix": fix})


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
