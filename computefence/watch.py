"""`fleet watch` as a library: the run's plan for the watch probe, and its hosts judged by
the run.* checks alone (computefence/evaluate/checks/watch_checks.py). Probing and the report are
the run session's:

    with open_session(targets, run.Rules(policy=loaded), ConnectSettings(probe="watch"),
                      verb="watch", planner=watch.plan) as session:
        hosts = session.probe()
        report = session.report(watch.judge(session.plan, hosts), kind="watch")

Nothing here prints or reads the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from computefence import evaluate, run
from computefence.evaluate.checks import policy_rules
from computefence.evaluate.checks.watch_checks import DEFAULT_STALL_MINUTES, settings_for
from computefence.evaluate.ledger import machine_key
from computefence.models import HostReport, HostStatus, LedgerMachine, Report, SourceStatus, Target, WatchFacts
from computefence.policy import EffectivePolicy

# Seconds of GPU sampling in each probe run.
GPU_WINDOW_S = 3.0


def plan(targets: Sequence[Target], rules: run.Rules | None = None, sources: Sequence[SourceStatus] = ()) -> run.Plan:
    """The targets as the watch probes them: the policy's checks merged in (output_dir), its
    job's process, log and loss line as probe parameters, no dataset scan and no canary."""
    prepared = run.plan(targets, rules, sources=sources)
    watched = [_watch_target(t, prepared.policies.get(t.name)) for t in prepared.targets]
    return run.Plan(targets=watched, rules=prepared.rules, policies=prepared.policies, sources=prepared.sources)


def _watch_target(target: Target, policy: EffectivePolicy | None) -> Target:
    job = policy.job if policy is not None else None
    extra: dict[str, Any] = {"gpu_window_s": GPU_WINDOW_S}
    if job is not None:
        for key, value in (("job_process", job.process), ("job_log", job.log), ("loss_regex", job.loss_regex)):
            if value:
                extra[key] = value
    checks = target.checks.model_copy(update={"dataset": None, "perf": False})
    return target.model_copy(update={"checks": checks, "probe_extra": extra})


def judge(
    run_plan: run.Plan,
    hosts: Sequence[HostReport],
    *,
    stall_minutes: float = DEFAULT_STALL_MINUTES,
    previous: Report | None = None,
    labels: Mapping[str, int] | None = None,
    machines: Sequence[LedgerMachine] = (),
) -> list[HostReport]:
    """Each watched host's run.* findings, under its policy's severities and skips and the
    rules' --only/--skip. `previous`: the last pass (or --history run), for rates and
    growth; `labels`: pod -> the label count a dataset check found; `machines`: the hosts
    ledger of a fleet check history, for the machine behind each pod."""
    ledger = {(m.provider, m.machine_id): m for m in machines}
    by_name = {t.name: t for t in run_plan.targets}
    judged = []
    for host in hosts:
        target = by_name.get(host.name)
        if target is None or host.status is not HostStatus.OK or host.facts is None:
            judged.append(host)
            continue
        policy = run_plan.policies.get(host.name)
        settings = settings_for(
            policy.job if policy is not None else None,
            stall_minutes,
            previous_facts(previous, host.name),
            (labels or {}).get(host.name),
            ledger.get(machine_key(host) or ("", "")),
        )
        findings = evaluate.evaluate_watch(host.facts, target.checks, target.provider, settings)
        if policy is not None:
            findings = policy_rules.apply_policy(findings, policy)
        rules = run_plan.rules
        selected = evaluate.select_findings(findings, only=list(rules.only), skip=list(rules.skip))
        judged.append(host.model_copy(update={"findings": selected}))
    return judged


def previous_facts(previous: Report | None, name: str) -> WatchFacts | None:
    if previous is None:
        return None
    for host in previous.hosts:
        if host.name == name and host.facts is not None:
            return host.facts.watch
    return None
