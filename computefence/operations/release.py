"""`fleet release`: give back the pods a saved report condemns, through the provider APIs.

Planned from the report alone (which pods, why, which action, the exact call), shown first
(the dry run is the default and calls nothing), then with `yes`: every provider is listed
again before anything is sent, and only ids still listed with the SSH endpoint (and machine)
of the report are acted on; then listed once more to show what the provider reports now.
Never a pod whose report shows GPU memory held by other processes, nor one that is ready.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from computefence import evaluate
from computefence.errors import ConfigError
from computefence.evaluate.fleet import job_may_be_running, release_findings
from computefence.interrupt import each_in_a_thread
from computefence.models import Finding, HostReport, HostStatus, HostVerdict, ReleasePod, ReleaseReport, Report, Target
from computefence.operations.action_log import ActionLog
from computefence.policy import matches
from computefence.sources.interface import ReleasingSource
from computefence.sources.registry import Listing, list_again
from computefence.text import one_line, plural

ACTIONS = ("stop", "terminate")
UNREACHABLE = "unreachable"
# Connection statuses that count as "did not answer" for --unreachable-runs.
NO_ANSWER = (HostStatus.UNREACHABLE, HostStatus.TIMEOUT)
# A report this far in the future is from a wrong clock, not from now.
CLOCK_SKEW = timedelta(minutes=5)
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str, flag: str) -> timedelta:
    """'1h', '30m', '90s', '1h30m' as a timedelta; ConfigError for anything else."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or match is None or not any(match.groups()):
        raise ConfigError(f"{flag} {text!r} is not a duration such as 1h, 30m or 90s")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


def report_time(report: Report, path: Path) -> datetime:
    try:
        when = datetime.fromisoformat(report.generated_at)
    except ValueError:
        raise ConfigError(f"{path}: generated_at {one_line(report.generated_at, 40)!r} is not a time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def check_age(report: Report, path: Path, max_age: timedelta, now: datetime) -> timedelta:
    """The report's age; ConfigError when it is older than `max_age` (a pod id in it may
    belong to another pod by now) or from the future."""
    age = now - report_time(report, path)
    if age > max_age:
        raise ConfigError(
            f"{path} is {age_text(age)} old, older than --max-age {age_text(max_age)}: "
            "run fleet check again (pods may have been replaced since)"
        )
    if age < -CLOCK_SKEW:
        raise ConfigError(f"{path} was generated {age_text(-age)} in the future: check the clock")
    return max(age, timedelta(0))


def age_text(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def check_patterns(patterns: Sequence[str], report: Report) -> None:
    """A --checks pattern that names no check is a usage error, as for --only."""
    known = set(evaluate.CHECKS) | {f.check for h in report.hosts for f in h.findings}
    for pattern in patterns:
        if not any(matches(check, pattern) for check in known):
            raise ConfigError(
                f"--checks {pattern!r} names no check; known checks: {', '.join(sorted(evaluate.CHECKS))}"
            )


def _identity(host: HostReport) -> tuple[str, str]:
    if host.provider is not None:
        return host.provider.provider, host.provider.pod_id
    return "", host.name


def unreachable_in_all(runs: Sequence[Report]) -> set[tuple[str, str]]:
    """Pods (provider, pod id) that did not answer (unreachable, timeout) in every one of `runs`."""
    if not runs:
        return set()
    sets = [{_identity(h) for h in run.hosts if h.status in NO_ANSWER} for run in runs]
    return set.intersection(*sets)


@dataclass(frozen=True)
class LastAnswer:
    """A pod's newest report in which it answered, and that run's time."""

    at: str
    host: HostReport


def unreachable_pods(newest_first: Iterable[Report], k: int) -> dict[tuple[str, str], LastAnswer | None] | None:
    """Pods that did not answer in each of the newest `k` runs, each with the newest earlier
    run in which it did answer (None if it never did); None when there are fewer than `k`
    runs. Older runs are read only until every such pod has its answer."""
    runs = iter(newest_first)
    last_k = [run for _, run in zip(range(k), runs)]
    if len(last_k) < k:
        return None
    found: dict[tuple[str, str], LastAnswer | None] = dict.fromkeys(unreachable_in_all(last_k))
    waiting = set(found)
    for run in runs:
        if not waiting:
            break
        for host in run.hosts:
            key = _identity(host)
            if key in waiting and host.status is HostStatus.OK:
                found[key] = LastAnswer(run.generated_at, host)
                waiting.discard(key)
    return found


# ---------------------------------------------------------------- the plan


@dataclass
class Planned:
    host: HostReport
    selected_by: list[str]
    findings: list[Finding]
    action: str | None
    outcome: str  # "would_release" or "refused"
    detail: str
    call: str | None = None

    def pod(self, outcome: str | None = None, detail: str | None = None) -> ReleasePod:
        info = self.host.provider
        return ReleasePod(
            name=self.host.name,
            provider=info.provider if info else None,
            pod_id=info.pod_id if info else None,
            machine_id=info.machine_id if info else None,
            action=self.action,
            selected_by=self.selected_by,
            cost_per_hour=info.cost_per_hour if info else None,
            outcome=outcome or self.outcome,
            detail=self.detail if detail is None else detail,
            reasons=[f"{f.check}: {f.message}" for f in self.findings]
            + (
                [f"unreachable: {self.host.reason or self.host.status.value}"]
                if UNREACHABLE in self.selected_by
                else []
            ),
        )


def plan(
    report: Report,
    sources: Mapping[str, ReleasingSource],
    *,
    patterns: Sequence[str] = (),
    unreachable: Mapping[tuple[str, str], LastAnswer | None] | None = None,
    action: str | None = None,
) -> list[Planned]:
    """Every pod the report condemns (a replace blocker, a --checks finding, or unanswered in
    each of the last runs), with what would be done to it or why nothing will be."""
    unreachable = unreachable or {}
    planned = []
    for host in report.hosts:
        findings = release_findings(host, list(patterns)) if host.status is HostStatus.OK else []
        # A pod with blockers is selected by them alone; the warnings beside them select nothing.
        blockers = [f for f in findings if f.severity.rank == 2]
        findings = blockers or findings
        selected_by = list(dict.fromkeys(f.check for f in findings))
        if _identity(host) in unreachable:
            selected_by.append(UNREACHABLE)
        if not selected_by:
            continue
        planned.append(_plan_one(host, findings, selected_by, sources, action, unreachable.get(_identity(host))))
    return _note_duplicates(planned)


def _note_duplicates(planned: list[Planned]) -> list[Planned]:
    """Entries of the report that name the same provider pod are one pod: one call is sent for
    all of them, and each says so."""
    names: dict[tuple[str, str], list[str]] = {}
    for item in planned:
        if item.outcome == "would_release":
            names.setdefault(_identity(item.host), []).append(item.host.name)
    for item in planned:
        same = names.get(_identity(item.host), [])
        if item.outcome == "would_release" and len(same) > 1:
            item.detail += f"; one call for the report's {', '.join(same)} (the same pod id)"
    return planned


def _plan_one(
    host: HostReport,
    findings: list[Finding],
    selected_by: list[str],
    sources: Mapping[str, ReleasingSource],
    action: str | None,
    last_answer: LastAnswer | None = None,
) -> Planned:
    def refused(why: str, chosen: str | None = None) -> Planned:
        return Planned(host, selected_by, findings, chosen, "refused", why)

    info = host.provider
    source = sources.get(info.provider) if info is not None else None
    if info is None or source is None:
        return refused("not from a provider API (an inventory or ssh_config pod has no provider id): not touched")
    running = job_may_be_running(host)
    if running:
        return refused(f"a job may be running: {one_line(running, 160)}")
    # A pod that stopped answering while its GPUs were busy may still be training.
    earlier = (
        job_may_be_running(last_answer.host) if last_answer is not None and host.status is not HostStatus.OK else None
    )
    if earlier and last_answer is not None:
        return refused(
            f"a job may still be running: the last run it answered ({last_answer.at}) showed {one_line(earlier, 160)}"
        )
    blockers = [f for f in findings if f.severity.rank == 2]
    if UNREACHABLE not in selected_by and not blockers:
        return refused(f"warnings only ({', '.join(selected_by)}), no blocker")
    if UNREACHABLE in selected_by and host.status is HostStatus.OK and not blockers:
        state = "ready" if host.verdict is HostVerdict.READY else "has warnings only"
        return refused(f"answered in this report and is {state}")
    chosen = action or ("stop" if "stop" in source.actions else None)
    if chosen is None or chosen not in source.actions:
        if chosen is None:
            return refused(f"{source.title} has no stop: pass --action terminate to destroy it")
        return refused(f"{source.title} has no {chosen}: pass --action {' or --action '.join(source.actions)}")
    if not source.accepts(info.pod_id):
        return refused(f"{info.pod_id!r} is not a {source.title} id: not touched", chosen)
    call = source.describe(info.pod_id, chosen)
    return Planned(host, selected_by, findings, chosen, "would_release", call, call)


# ---------------------------------------------------------------- acting


def _changed(host: HostReport, now: Target) -> str | None:
    """How the pod listed now differs from the one in the report, or None if it is the same."""
    before, after = host.provider, now.provider
    if before is not None and after is not None and before.machine_id and after.machine_id:
        if before.machine_id != after.machine_id:
            return f"now on machine {after.machine_id}, the report saw {before.machine_id}"
    if (now.host or "", now.port) != (host.host or "", host.port if host.port is not None else 22):
        return f"SSH endpoint now {now.host or '(none)'}:{now.port}, the report saw {host.host or '(none)'}:{host.port}"
    return None


def _stopped(now: Target) -> bool:
    state = (now.provider.state if now.provider else None) or ""
    return state.lower() in ("exited", "stopped")


def act(
    planned: Sequence[Planned],
    sources: Mapping[str, ReleasingSource],
    progress: Callable[[str], None] | None = None,
    log: ActionLog | None = None,
) -> list[ReleasePod]:
    """Release the planned pods: list every provider again, act on the unchanged ones, then
    list again to show what the provider reports. Refused pods are passed through. Each call
    is recorded in `log` before it is sent and when it is answered."""
    say = progress or (lambda line: print(line, file=sys.stderr))
    todo = [p for p in planned if p.outcome == "would_release"]
    by_provider: dict[str, list[Planned]] = {}
    for item in todo:
        by_provider.setdefault(item.host.provider.provider, []).append(item)  # type: ignore[union-attr]
    results: dict[int, ReleasePod] = {}
    names = list(by_provider)
    # Providers in parallel (Lambda's pacing of a request a second must not hold up the others),
    # each on one connection. Every provider is listed again (its key and SDK found) before
    # anything is sent to any: a missing key (ConfigError) ends the run with nothing touched.
    # A Ctrl-C ends the wait at once, never after a trickling provider's deadline.
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(sources[name])
            say(f"computefence: listing {sources[name].title} pods again before acting")
        listings = dict(zip(names, each_in_a_thread(lambda name: list_again(sources[name]), names)))
        for done in each_in_a_thread(
            lambda name: _act_provider(sources[name], by_provider[name], listings[name], say, log), names
        ):
            results.update(done)
    return [results.get(id(p)) or p.pod() for p in planned]


def _act_provider(
    source: ReleasingSource, mine: list[Planned], now: Listing, say: Callable[[str], None], log: ActionLog | None
) -> dict[int, ReleasePod]:
    """One provider's pods: those still as in the report get the action (in one call where the
    API takes many), then the provider is listed again to show what it reports now."""
    results: dict[int, ReleasePod] = {}
    ready: dict[str, list[Planned]] = {}
    for item in mine:
        held = _held_back(item, source, now)
        if held is not None:
            results[id(item)] = held
        else:
            ready.setdefault(item.action or "", []).append(item)
    for action, items in ready.items():
        # One call per pod, however many of the report's entries name its id.
        entries: dict[str, list[Planned]] = {}
        for item in items:
            entries.setdefault(item.host.provider.pod_id, []).append(item)  # type: ignore[union-attr]
        ids = list(entries)
        say(f"computefence: {action} {', '.join(item.host.name for item in items)} on {source.title}")
        unlogged = _record_sends(log, entries)
        if unlogged is not None:  # fail closed: a call that cannot be logged is not sent
            for item in items:
                results[id(item)] = item.pod("failed", f"could not log the call, so nothing was sent: {unlogged}")
            continue
        answers = source.release_all(ids, action)
        for pod_id, named in entries.items():
            answer = answers.get(pod_id)
            outcome, detail = (answer.outcome, answer.detail) if answer else ("failed", "the provider gave no answer")
            if len(named) > 1:
                detail += f"; one call for {source.title} {pod_id}, which the report lists as " + ", ".join(
                    item.host.name for item in named
                )
            first = named[0].pod(outcome, detail)
            unrecorded = ""
            if log is not None:
                try:
                    log.record("answer", **_logged(first, outcome=True, entries=named))
                except ConfigError as exc:  # the call was made: its outcome stands and is shown
                    unrecorded = f"; its answer is not logged: {exc}"
            for item in named:
                result = item.pod(outcome, detail)
                results[id(item)] = result.model_copy(update={"detail": result.detail + unrecorded})
    released = [item for item in mine if results[id(item)].outcome == "released"]
    if released:
        after = list_again(source)
        for item in released:
            results[id(item)] = _proven(results[id(item)], item, after)
    return results


def _record_sends(log: ActionLog | None, entries: Mapping[str, list[Planned]]) -> ConfigError | None:
    """Log each call before it is sent; the error when the log cannot take them."""
    try:
        for named in entries.values():
            if log is not None:
                log.record("send", **_logged(named[0].pod("would_release"), call=named[0].call, entries=named))
    except ConfigError as exc:
        return exc
    return None


def _logged(
    pod: ReleasePod, *, call: str | None = None, outcome: bool = False, entries: Sequence[Planned] = ()
) -> dict[str, object]:
    """A log line's fields: the pod and action (and every report entry naming it, where there
    are several), then the call about to be sent or the answer."""
    fields = pod.model_dump(include={"name", "provider", "pod_id", "machine_id", "action"})
    if len(entries) > 1:
        fields["names"] = [item.host.name for item in entries]
    return {**fields, "call": call} if not outcome else {**fields, "outcome": pod.outcome, "detail": pod.detail}


def _held_back(item: Planned, source: ReleasingSource, now: Listing) -> ReleasePod | None:
    """The outcome of a pod nothing is sent for (the listing failed, it is gone, already
    stopped, or changed since the report); None for one to act on."""
    info = item.host.provider
    assert info is not None and item.action is not None
    if now.error is not None:
        return item.pod("failed", f"could not list {source.title} pods again, so nothing was sent: {now.error}")
    current = now.targets.get(info.pod_id)
    if current is None:
        return item.pod("gone", f"{source.title} no longer lists {info.pod_id}: already terminated")
    if item.action == "stop" and _stopped(current):
        return item.pod("already_stopped", f"{source.title} lists it as {current.provider.state}: nothing sent")  # type: ignore[union-attr]
    changed = _changed(item.host, current)
    if changed and not (item.action == "terminate" and _stopped(current) and _same_machine(item.host, current)):
        return item.pod("changed", f"changed since the report, not touched: {changed}")
    return None


def _same_machine(host: HostReport, now: Target) -> bool:
    """A stopped pod has no SSH endpoint to compare; it is the report's pod when its machine is."""
    before, after = host.provider, now.provider
    return bool(before and after and before.machine_id and before.machine_id == after.machine_id)


def _proven(result: ReleasePod, item: Planned, after: Listing) -> ReleasePod:
    """The answer, with what the provider's listing shows right after it."""
    if after.error is not None:
        note = "the listing afterwards failed, so it is unconfirmed"
    else:
        current = after.targets.get(result.pod_id or "")
        if current is None:
            note = "no longer listed"
        else:
            state = (current.provider.state if current.provider else None) or "?"
            note = f"listed now as {state}"
            if item.action == "stop" and not _stopped(current):
                note += " (a stop can take a minute to show)"
    return result.model_copy(update={"detail": f"{result.detail}; {note}"})


def interrupted_line(log: ActionLog) -> str:
    """What a release interrupted while acting did: nothing, or calls whose answers it did
    not wait for (the log holds each call, logged before it was sent)."""
    if not log.sends:
        return "computefence: interrupted; no provider call was sent"
    return (
        f"computefence: interrupted; {plural(log.sends, 'provider call')} sent, "
        f"not all answered: see {log.path} and the provider's console"
    )


def release_report(pods: list[ReleasePod], dry_run: bool) -> ReleaseReport:
    return ReleaseReport(dry_run=dry_run, pods=pods)


def exit_code(result: ReleaseReport) -> int:
    """1 when a provider call (or the listing before it) failed, else 0."""
    return 1 if any(p.outcome == "failed" for p in result.pods) else 0
