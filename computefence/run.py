"""The steps of a run: targets, the policy applied to them, a connector's probes, the
evaluator per host and across the fleet, one Report.

A command opens them as a run session (computefence/session.py), and so does one call:

    report = computefence.check(TargetSelection(inventories=("pods.yaml",)), "ssh", policy=Path("computefence.yaml"))

The steps one by one, for a script that acts between them:

    rules = run.rules(policy=..., only=[...])          # a typo or a bad file fails here
    plan = run.plan(targets, rules, perf=False)        # the policy's checks on each target
    hosts = await run.probe_targets(plan, connector)   # facts, or a status saying why not
    report = run.report_for(plan, run.evaluate_hosts(plan, hosts), kind="fleet")

Nothing here prints, reads the terminal or installs signal handlers: progress goes to
`on_progress`, and setting `stop` cancels the pods still in flight (they are reported as
cancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from computefence import evaluate
from computefence.connectors.interface import Connector, check_targets
from computefence.models import (
    AppliedFile,
    BaselineLock,
    HostReport,
    HostStatus,
    Report,
    Severity,
    SourceStatus,
    Target,
)
from computefence.policy import EffectivePolicy, LoadedPolicy, apply_policy, load_policy, merge_checks, probe_extra
from computefence.sources import TargetSelection, collect_targets

__all__ = [
    "Plan",
    "ProgressCallback",
    "Rules",
    "applied",
    "apply_policy",
    "custom_ids",
    "evaluate_hosts",
    "mark_vanished",
    "merge_checks",
    "plan",
    "probe_extra",
    "probe_targets",
    "reevaluate",
    "report_for",
    "rules",
    "with_run_params",
    "with_status_fix",
]

ProgressCallback = Callable[[HostReport], None]


# ---------------------------------------------------------------- the rules a run judges by


@dataclass(frozen=True)
class Rules:
    """How a run judges: the job's policy, the baseline lock and --only/--skip."""

    policy: LoadedPolicy | None = None
    lock: BaselineLock | None = None
    lock_file: AppliedFile | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()


def rules(
    *,
    policy: LoadedPolicy | Path | None = None,
    baseline: BaselineLock | Path | None = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
) -> Rules:
    """The run's rules, checked now: a policy or baseline file that does not load, or an
    --only/--skip pattern that names no check, is a ConfigError before any pod is contacted.

    `policy` is a loaded policy or a computefence.yaml to load (nothing is searched for);
    `baseline` a lock or a lock file, else the policy's `baseline:`."""
    # Imported here, as the evaluator's fleet step in `reevaluate`: doctor starts its probe
    # before these have loaded, and loads them beside it (cli/doctor.py).
    from computefence.baseline import load_baseline, resolve_baseline

    loaded = load_policy(policy, evaluate.CHECKS) if isinstance(policy, Path) else policy
    lock: BaselineLock | None
    lock_file: AppliedFile | None
    if isinstance(baseline, BaselineLock):
        lock, lock_file = baseline, None
    elif isinstance(baseline, Path):
        lock, lock_file = load_baseline(baseline)
    else:
        lock, lock_file = resolve_baseline(None, loaded)
    evaluate.select_findings([], only=list(only), skip=list(skip), extra_checks=custom_ids(loaded))
    return Rules(policy=loaded, lock=lock, lock_file=lock_file, only=tuple(only), skip=tuple(skip))


def applied(loaded: LoadedPolicy | None) -> AppliedFile | None:
    """The policy file as a report records it."""
    return AppliedFile(path=loaded.path, sha256=loaded.sha256) if loaded is not None else None


def custom_ids(loaded: LoadedPolicy | None) -> frozenset[str]:
    """custom.<id> of every custom check the policy and its overrides define (for --only/--skip)."""
    if loaded is None:
        return frozenset()
    checks = [*loaded.policy.custom, *(c for o in loaded.policy.overrides for c in o.custom)]
    return frozenset(c.check for c in checks)


# ---------------------------------------------------------------- what a run checks


@dataclass(frozen=True)
class Plan:
    """What a run checks, settled before any pod is contacted: the targets with the policy's
    checks and probe parameters merged in, each one's effective policy, and the rules."""

    targets: list[Target]
    rules: Rules = field(default_factory=Rules)
    policies: dict[str, EffectivePolicy] = field(default_factory=dict)
    # How each target source fared, for the report.
    sources: list[SourceStatus] = field(default_factory=list)

    def subset(self, names: Collection[str]) -> Plan:
        """The same plan for only the targets named (a re-probe of a few pods)."""
        return replace(self, targets=[t for t in self.targets if t.name in names])


def plan(
    targets: Sequence[Target] | TargetSelection,
    run_rules: Rules | None = None,
    *,
    perf: bool = False,
    sources: Sequence[SourceStatus] = (),
) -> Plan:
    """The plan for `targets` (or the targets a selection reads, with their sources'
    statuses) under `run_rules`; `perf` adds the GPU measurements to every target."""
    run_rules = run_rules if run_rules is not None else Rules()
    if isinstance(targets, TargetSelection):
        listed, statuses = collect_targets(targets)
        sources = [*sources, *statuses]
    else:
        listed = list(targets)
    prepared, policies = apply_policy(listed, run_rules.policy)
    if perf:
        prepared = [t.model_copy(update={"checks": t.checks.model_copy(update={"perf": True})}) for t in prepared]
    return Plan(targets=prepared, rules=run_rules, policies=policies, sources=list(sources))


# ---------------------------------------------------------------- the steps of a run


async def probe_targets(
    run_plan: Plan | Sequence[Target],
    connector: Connector,
    probe_params: dict[str, Any] | None = None,
    *,
    on_progress: ProgressCallback | None = None,
    stop: asyncio.Event | None = None,
    connect_timeout: float | None = None,
) -> list[HostReport]:
    """One HostReport per target, in the plan's order: facts, or the status saying why not
    with the evaluator's fix for it (its ssh command waits `connect_timeout`, as the run did).
    `probe_params` are added to every target's (e.g. per-collector "timeouts")."""
    targets = run_plan.targets if isinstance(run_plan, Plan) else list(run_plan)
    params = with_run_params(targets, probe_params)
    hosts = await check_targets(connector, targets, params, on_progress=on_progress, stop=stop)
    return [with_status_fix(target, host, connect_timeout) for target, host in zip(targets, hosts)]


def with_run_params(targets: Sequence[Target], probe_params: dict[str, Any] | None) -> dict[str, Any]:
    """What every target's probe gets from the run: `probe_params` and, with --perf, the
    evaluator's figure for a busy GPU (the canary stays off GPUs gpu.memory-in-use would
    call busy)."""
    params = dict(probe_params or {})
    if any(t.checks.perf for t in targets):
        # Imported here: `doctor` starts its probe before the evaluator has loaded.
        from computefence.evaluate.checks.gpu import BUSY_MIB

        params.setdefault("perf_busy_mib", BUSY_MIB)
    return params


def with_status_fix(target: Target, host: HostReport, connect_timeout: float | None = None) -> HostReport:
    """A host the connector could not check, with what to run (and know) about it; the ssh
    command of the fix waits `connect_timeout` (default: the evaluator's)."""
    if host.status is HostStatus.OK or host.fix is not None:
        return host
    # Imported here: `doctor` starts its probe before the evaluator has loaded.
    from computefence.evaluate.connection import DEFAULT_CONNECT_TIMEOUT, status_fix

    wait = DEFAULT_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
    fix = status_fix(target, host.status, host.status_detail or host.reason, connect_timeout=wait)
    return host.model_copy(update={"fix": fix})


_MAYBE_GONE = {HostStatus.UNREACHABLE, HostStatus.TIMEOUT, HostStatus.CONNECTION_LOST, HostStatus.HOST_KEY_MISMATCH}


def mark_vanished(targets: Sequence[Target], hosts: Sequence[HostReport], api_url: str | None) -> list[HostReport]:
    """Provider pods that failed to answer are re-listed: one stopped or terminated since
    discovery is reported as vanished, not as a broken pod. For live runs only: a recorded
    or simulated pod's provider does not know it."""
    suspects = [t for t, h in zip(targets, hosts) if t.provider is not None and h.status in _MAYBE_GONE]
    if not suspects:
        return list(hosts)
    from computefence.sources.registry import recheck_vanished

    gone = recheck_vanished(suspects, api_url)
    return [
        host.model_copy(
            update={
                "status": HostStatus.VANISHED,
                "reason": gone[target.name],
                "fix": evaluate.status_fix(target, HostStatus.VANISHED),
            }
        )
        if target.name in gone
        else host
        for target, host in zip(targets, hosts)
    ]


def evaluate_hosts(run_plan: Plan, hosts: Sequence[HostReport]) -> list[HostReport]:
    """Each checked host's findings (its target's checks and policy), then the fleet-wide
    ones, the policies' severities and skips, and --only/--skip. A host is matched to its
    target by name, so the hosts of a re-probed subset can be judged with the whole plan."""
    by_name = {t.name: t for t in run_plan.targets}
    judged = []
    for host in hosts:
        target = by_name.get(host.name)
        if target is not None and host.status is HostStatus.OK and host.facts is not None:
            host = evaluate.judge_host(host, target.checks, target.provider, run_plan.policies.get(target.name))
        judged.append(host)
    rules_ = run_plan.rules
    return evaluate.finish_hosts(judged, run_plan.policies, rules_.lock, only=list(rules_.only), skip=list(rules_.skip))


def report_for(
    run_plan: Plan,
    hosts: Sequence[HostReport],
    *,
    kind: str = "fleet",
    fail_on: Severity | str = Severity.BLOCK,
    allow_unreachable: bool = False,
) -> Report:
    """The report of judged hosts: summary, verdict, and the policy and baseline files used."""
    report = evaluate.build_report(
        list(hosts),
        kind=kind,
        sources=run_plan.sources,
        fail_on=Severity(fail_on),
        allow_unreachable=allow_unreachable,
    )
    return report.model_copy(update={"policy": applied(run_plan.rules.policy), "baseline": run_plan.rules.lock_file})


def reevaluate(report: Report, loaded: LoadedPolicy) -> Report:
    """A saved report judged under another policy, from its saved facts (`report FILE`)."""
    from computefence.evaluate.fleet import summarize

    hosts = [evaluate.reapply_policy(h, loaded.policy.for_target(h.name, h.tags)) for h in report.hosts]
    return report.model_copy(
        update={
            "hosts": hosts,
            "policy": applied(loaded),
            "summary": summarize(hosts, report.sources, allow_unreachable=report.allow_unreachable),
        }
    )
