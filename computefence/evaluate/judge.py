"""The evaluator's registry and judging steps: every area's RULES and CHECKS (from the table
in checks.areas), and the functions that judge a host and a fleet. Read through the package (`from computefence
import evaluate`, `evaluate.CHECKS`), which loads this module on first use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from computefence.errors import ConfigError
from computefence.evaluate.checks import environment, job, policy_rules, watch_checks
from computefence.evaluate.checks.areas import AREAS
from computefence.evaluate.context import Rule, build_context, skipped
from computefence.evaluate.fleet_steps import FleetStep, run_fleet_step, unjudged
from computefence.evaluate.identity import subject_keys, with_keys
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.evaluate.torch_builds import one_install_per_package
from computefence.models import (
    BaselineLock,
    CheckOptions,
    Facts,
    Finding,
    Fix,
    HostReport,
    HostStatus,
    ProviderInfo,
    Report,
)
from computefence.policy import EffectivePolicy, matches
from computefence.text import one_line

# Every area's rules of one host's facts, in table order (checks.areas.AREAS).
RULES: list[Rule] = [rule for area in AREAS.values() for rule in area.module.RULES]

# Every check id the rules can emit, with what it verifies and what a blocker calls for.
CHECKS: dict[str, CheckSpec] = {check: spec for area in AREAS.values() for check, spec in area.module.CHECKS.items()}
CHECK_IDS: frozenset[str] = frozenset(CHECKS)


def evaluate_host(
    facts: Facts, checks: CheckOptions, provider: ProviderInfo | None = None, policy: EffectivePolicy | None = None
) -> list[Finding]:
    """All findings for one host, passes included, in RULES order, then the policy's own,
    each with its remedy and key; the policy's severities and skips are applied by
    finish_hosts."""
    findings: list[Finding] = []
    rule_name = "context"
    try:
        ctx = build_context(
            facts,
            checks,
            provider,
            policy.thresholds if policy is not None else None,
            policy.hardware.gpu_count if policy is not None else None,
            job.host_job(policy.job if policy is not None else None, facts),
        )
        for rule in RULES:
            rule_name = rule.__name__.removeprefix("check_")
            findings.extend(rule(facts, checks, ctx))
        if policy is not None:
            rule_name = "policy"
            findings.extend(policy_rules.policy_findings(facts, policy, ctx))
        rule_name = "one install per package"
        findings = one_install_per_package(findings)
    except Exception as exc:  # a value no rule foresaw; the pod fails closed
        raise JudgingError(f"{rule_name}: {type(exc).__name__}: {one_line(exc, 160)}") from exc
    key_of = subject_keys(facts)
    return [_finish(f, key_of) for f in findings]


def evaluate_watch(
    facts: Facts, checks: CheckOptions, provider: ProviderInfo | None, settings: watch_checks.WatchSettings
) -> list[Finding]:
    """The run.* findings for one pod's watch facts; nothing else judges a watch."""
    key_of = subject_keys(facts)
    return [_finish(f, key_of) for f in watch_checks.evaluate_watch(facts, checks, provider, settings)]


class JudgingError(Exception):
    """A rule failed on one pod's facts: that pod cannot be judged, the others still are."""


def judge_host(
    host: HostReport, checks: CheckOptions, provider: ProviderInfo | None, policy: EffectivePolicy | None
) -> HostReport:
    """`host` with its findings; probe_failed, naming the rule, where its facts break a rule:
    one pod's answer never crashes the run or decides its exit status, and never passes."""
    assert host.facts is not None
    try:
        findings = evaluate_host(host.facts, checks, provider, policy)
    except JudgingError as exc:
        return unjudged(host, str(exc))
    return host.model_copy(update={"findings": findings})


def finish_hosts(
    hosts: list[HostReport],
    policies: dict[str, EffectivePolicy],
    lock: BaselineLock | None,
    only: list[str],
    skip: list[str],
) -> list[HostReport]:
    """The fleet-wide findings (env.outlier, env.drift against `lock`) added to each checked
    host (a pod whose facts break that step is probe_failed, see fleet_steps), then each host's policy severities and skips, then --only/--skip; every finding
    with its key (what identifies it across runs)."""
    severities = {name: p.severity for name, p in policies.items()}
    requirements = {name: p.requirement_specs() for name, p in policies.items()}
    check = environment.OUTLIER if lock is None else environment.DRIFT
    across: FleetStep[dict[str, list[Finding]]] = run_fleet_step(
        check, hosts, lambda some: environment.environment_findings(some, lock, severities, requirements), {}
    )
    extra = dict(across.result)
    finished = []
    for host in across.hosts:
        if host.status is not HostStatus.OK or host.facts is None:
            finished.append(host)
            continue
        if across.error is not None:
            extra[host.name] = [skipped(check, f"not compared with the fleet ({across.error})")]
        key_of = subject_keys(host.facts)
        findings = [*host.findings, *(_finish(f, key_of) for f in extra.get(host.name, []))]
        policy = policies.get(host.name)
        if policy is not None:
            findings = policy_rules.apply_policy(findings, policy)
        findings = with_keys(host.facts, select_findings(findings, only=only, skip=skip))
        finished.append(host.model_copy(update={"findings": findings}))
    return finished


def remedy_of(finding: Finding) -> Remedy:
    """The finding's own remedy, else its check's; a check the registry does not know (a
    custom.* check of a report saved before remedies) calls for a fix."""
    if finding.remedy is not None:
        return finding.remedy
    spec = CHECKS.get(finding.check)
    return spec.remedy if spec is not None else Remedy.FIX


def with_remedies(report: Report) -> Report:
    """A saved report whose findings all carry a remedy (those saved before remedies existed
    get their check's)."""
    if all(f.remedy is not None for h in report.hosts for f in h.findings):
        return report
    hosts = [
        h.model_copy(
            update={"findings": [f if f.remedy else f.model_copy(update={"remedy": remedy_of(f)}) for f in h.findings]}
        )
        for h in report.hosts
    ]
    return report.model_copy(update={"hosts": hosts})


def _finish(finding: Finding, key_of: Callable[[str | None], str | None] | None = None) -> Finding:
    # Paths and names come from the pod; a newline in one must not break a report line
    # (or turn one fix command into two). Every finding gets its check's remedy here too,
    # and with `key_of` (identity.subject_keys of its pod) its key: one copy of the finding
    # for all of them, since a pool's report has 15 findings a pod.
    update: dict[str, Any] = {}
    if finding.remedy is None:
        update["remedy"] = remedy_of(finding)
    if key_of is not None and finding.key is None and (key := key_of(finding.subject)) is not None:
        update["key"] = key
    fix = finding.fix
    texts = [finding.message, *(fix.commands if fix else []), (fix.advice if fix else None) or ""]
    if any("\n" in text for text in texts):
        if fix is not None:
            fix = Fix(
                steps=[step.model_copy(update={"run": one_line(step.run, None)}) for step in fix.steps],
                advice=one_line(fix.advice, None) if fix.advice else None,
            )
        update["fix"] = fix
        update["message"] = one_line(finding.message, None)
    return finding.model_copy(update=update) if update else finding


def reapply_policy(host: HostReport, policy: EffectivePolicy) -> HostReport:
    """A saved host's findings under another policy: its policy.* and custom.* findings
    judged again from the saved facts, then the policy's severities and skips. Thresholds
    and checks that need the pod again are not re-run."""
    if host.status is not HostStatus.OK or host.facts is None:
        return host
    ctx = build_context(
        host.facts, CheckOptions(), host.provider, policy.thresholds, job=job.host_job(policy.job, host.facts)
    )
    kept = [f for f in host.findings if not f.check.startswith(("policy.", "custom.")) and f.check not in job.CHECKS]
    sized = [f for rule in job.RULES for f in rule(host.facts, _saved_checks(host, policy), ctx)]
    judged = [*sized, *policy_rules.policy_findings(host.facts, policy, ctx)]
    findings = one_install_per_package([*kept, *(_finish(f) for f in judged)])
    return host.model_copy(update={"findings": with_keys(host.facts, policy_rules.apply_policy(findings, policy))})


def _saved_checks(host: HostReport, policy: EffectivePolicy) -> CheckOptions:
    # The job checks need the output dir the pod was probed with: the policy's, as the saved
    # facts' output_dir path shows it.
    saved = next((p.path for p in host.facts.storage.paths if p.role == "output_dir"), None) if host.facts else None
    return CheckOptions(output_dir=saved or policy.checks.output_dir)


def select_findings(
    findings: list[Finding], only: list[str], skip: list[str], extra_checks: frozenset[str] = frozenset()
) -> list[Finding]:
    """Findings of the --only checks (all when empty) minus the --skip ones. A pattern that
    names no known check is a ConfigError: a typo in --only must not turn a run green.
    `extra_checks` are ids known beyond the registry (a policy's custom.<id>)."""
    if not only and not skip:
        return list(findings)  # every pod's case: no set of known checks built per pod
    known = set(CHECKS) | extra_checks | {f.check for f in findings}
    for flag, patterns in (("--only", only), ("--skip", skip)):
        for pattern in patterns:
            if not any(matches(check, pattern) for check in known):
                raise ConfigError(f"{flag} {pattern!r} names no check; known checks: {', '.join(sorted(CHECKS))}")
    kept = [f for f in findings if not only or any(matches(f.check, p) for p in only)]
    return [f for f in kept if not any(matches(f.check, p) for p in skip)]
