"""`fleet fix` and `doctor --fix` on a run session: plan each host's safe steps, apply them,
re-probe the hosts where anything ran, and judge each finding before and after.

    with open_session(selection, rules, settings, verb="check", sigint=True) as session:
        probed = session.probe()
        before = session.judge(probed)
        report = fix_run.plan_fixes(before, allow_disruptive)       # the plan: nothing runs
        done = asyncio.run(fix_run.apply_and_prove(session, probed, before, report, options))

The command asks before applying; everything else is here, the same for a fleet over SSH
and for this machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from computefence.models import FixHost, FixReport, HostReport, Target, acts
from computefence.operations import fix as fixes
from computefence.session import RunSession
from computefence.text import plural
from computefence.version import __version__


def plan_fixes(before: Sequence[HostReport], allow_disruptive: bool, targets: Sequence[Target] = ()) -> FixReport:
    """The plan: each judged host's steps in order, and what will not run and why. Names of
    one pod among `targets` (in the same order) each carry all its names, the one its steps run
    under first (the first name with a step to run: one name may be reachable, another not)."""
    plans = [fixes.plan_host(host, allow_disruptive) for host in before]
    for group in fixes.same_pods(targets) if targets else []:
        if len(group) > 1:
            group = sorted(group, key=lambda i: not any(s.status == "planned" for s in plans[i].steps))
            names = [plans[i].name for i in group]
            for i in group:
                plans[i] = plans[i].model_copy(update={"same_pod": names})
    report = FixReport(
        tool_version=__version__, generated_at=_now(), applied=False, allow_disruptive=allow_disruptive, hosts=plans
    )
    return report.model_copy(update={"summary": fixes.summarize(plans)})


@dataclass
class AppliedFixes:
    """What applying did: the judged report, the hosts as judged after (the re-probed ones
    replaced), and one transcript per host for --log."""

    report: FixReport
    after: list[HostReport]
    transcripts: list[fixes.Transcript]


async def apply_and_prove(
    session: RunSession,
    probed: Sequence[HostReport],
    before: Sequence[HostReport],
    planned: FixReport,
    options: fixes.ApplyOptions,
    on_step: fixes.StepProgress | None = None,
) -> AppliedFixes:
    """Run the planned steps (a stop: no new step, TERM to the running ones), re-probe the
    hosts where anything ran, judge them with the whole plan, and say per finding what the
    steps did. `probed` and `before` are the session's first probe, raw and judged, in the
    plan's order."""
    targets = session.plan.targets
    # A pod named more than once (a provider id, an SSH endpoint) is acted on once, under its
    # first name; every name gets those steps' records and is re-probed and judged as itself.
    groups = fixes.same_pods(targets)
    leads = [next(i for i in group if acts(planned.hosts[i])) for group in groups]
    async with session.stopping() as stop:
        applied = await fixes.apply_all([planned.hosts[i] for i in leads], session.open_shell, options, stop, on_step)
        by_index: dict[int, tuple[FixHost, fixes.Transcript]] = {}
        for group, (host, transcript) in zip(groups, applied):
            for i in group:
                name, names = targets[i].name, planned.hosts[i].same_pod
                by_index[i] = (
                    host.model_copy(update={"name": name, "same_pod": names}),
                    fixes.Transcript(name, transcript.entries, names),
                )
        done = [by_index[i] for i in range(len(targets))]
        changed = [target.name for target, (host, _) in zip(targets, done) if fixes.executed(host)]
        reprobed: dict[str, HostReport] = {}
        if changed and not stop.is_set():
            session.note(f"re-probing {plural(len(changed), 'pod')} that changed")
            hosts = await session.probe_async(changed, stop=stop, progress=False)
            reprobed = dict(zip(changed, hosts))
    interrupted = session.interrupted
    after = session.judge([reprobed.get(target.name, host) for target, host in zip(targets, probed)])
    final = [
        fixes.judge(host, prior, judged if target.name in reprobed else None, interrupted)
        for target, (host, _), prior, judged in zip(targets, done, before, after)
    ]
    report = planned.model_copy(
        update={"applied": True, "interrupted": interrupted, "hosts": final, "summary": fixes.summarize(final)}
    )
    return AppliedFixes(report=report, after=after, transcripts=[transcript for _, transcript in done])


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()
