"""`fleet fix` and `doctor --fix`: the safe fix steps of each pod's findings, planned, run once
over one shell session per pod, and proven by a re-probe.

Planning is pure (a checked HostReport in, the steps it would run and why the others will not
out). Applying runs each pod's runnable steps in order, a finding's steps stopping at the first
failure, never a step on a pod whose GPUs hold other processes' memory (a job may be running).
Judging compares each finding before and after the re-probe. One attempt per run, never a loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from computefence.connectors.interface import Outcome
from computefence.connectors.shell import MAX_STEP_OUTPUT, Shell, StepRun
from computefence.evaluate.checks.gpu import BUSY_MIB
from computefence.evaluate.file_edits import REFUSED
from computefence.evaluate.machine import machine_changes
from computefence.files import file_name_for
from computefence.models import (
    Finding,
    FindingResult,
    FixHost,
    FixStep,
    FixSummary,
    HostReport,
    HostStatus,
    Severity,
    StepKind,
    StepPlace,
    StepRecord,
    Target,
)
from computefence.redaction import redact
from computefence.text import one_line

# How much of a step's output the report keeps; --log keeps up to MAX_STEP_OUTPUT.
TAIL_CHARS = 2000
PROBLEMS = (Severity.WARN, Severity.BLOCK)


# ---------------------------------------------------------------- planning


def busy_reason(host: HostReport) -> str | None:
    """Why a job may be running on the pod: GPU memory other processes hold."""
    if host.facts is None:
        return None
    busy = [g for g in host.facts.gpu.gpus if g.memory_used_mib is not None and g.memory_used_mib > BUSY_MIB]
    if not busy:
        return None
    held = ", ".join(f"GPU {g.index} {g.memory_used_mib} MiB" for g in busy)
    return f"GPU memory is held by other processes ({held}): a job may be running, so nothing is changed on this pod"


def _not_runnable(step: FixStep, allow_disruptive: bool) -> str | None:
    if step.on is StepPlace.LOCAL:
        return "runs on your machine, not the pod: run it yourself"
    if step.kind is StepKind.INSPECT:
        return "only shows something; it fixes nothing"
    if step.kind is StepKind.DESTRUCTIVE:
        return "deletes data: never run by fleet fix"
    if step.kind is StepKind.DISRUPTIVE and not allow_disruptive:
        return "restarts a service or the GPU (a running job would die): --allow-disruptive runs it"
    return None


def plan_host(host: HostReport, allow_disruptive: bool) -> FixHost:
    """The steps fleet fix would run on this pod, in order, and every step it will not run, with why."""
    if host.status is not HostStatus.OK:
        return FixHost(name=host.name, status=host.status, reason=host.reason)
    refused = busy_reason(host)
    steps: list[StepRecord] = []
    results: list[FindingResult] = []
    for finding in problems(host):
        fix = finding.fix
        planned = False
        blocked: str | None = refused
        for step in fix.steps if fix else []:
            why = _not_runnable(step, allow_disruptive)
            if why is None and blocked is not None:
                why = blocked
            if why is not None and blocked is None and step.kind is not StepKind.INSPECT:
                # The steps after one that changes something depend on it (a restart, then what needs it).
                blocked = "an earlier step of this fix is not run"
            status = "skipped" if why else "planned"
            planned = planned or status == "planned"
            steps.append(_record(finding, step, status, reason=why))
        if planned:
            results.append(_result(finding, "planned"))
        else:
            results.append(_result(finding, "skipped", reason=_skip_reason(finding, refused, steps)))
    return FixHost(name=host.name, refused=refused, steps=steps, results=results)


def problems(host: HostReport) -> list[Finding]:
    return [f for f in host.findings if f.severity in PROBLEMS]


def _skip_reason(finding: Finding, refused: str | None, steps: list[StepRecord]) -> str:
    if refused:
        return refused
    fix = finding.fix
    if not fix or not fix.steps:
        return f"advice only: {fix.advice}" if fix and fix.advice else "no fix is known"
    mine = [s for s in steps if s.check == finding.check and s.subject == finding.subject]
    reasons = sorted({s.reason for s in mine if s.reason})
    return "; ".join(reasons) or "nothing to run"


def _record(finding: Finding, step: FixStep, status: str, **extra: Any) -> StepRecord:
    return StepRecord(
        check=finding.check, subject=finding.subject, run=step.run, on=step.on, kind=step.kind, status=status, **extra
    )


def _result(finding: Finding, outcome: str, **extra: Any) -> FindingResult:
    return FindingResult(
        check=finding.check, subject=finding.subject, before=finding.severity, outcome=outcome, **extra
    )


# ---------------------------------------------------------------- applying


@dataclass
class ApplyOptions:
    step_timeout: float = 300.0
    concurrency: int = 32


@dataclass
class Transcript:
    """One pod's --log: each command, its exit status, duration and output (capped), secrets
    redacted as in the report."""

    name: str
    entries: list[tuple[StepRecord, bytes]] = field(default_factory=list)
    same_pod: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"# computefence fleet fix: {self.name}"]
        if self.same_pod:
            lines.append(f"# one pod named {', '.join(self.same_pod)}: its steps ran once, under {self.same_pod[0]}")
        for record, output in self.entries:
            shown = "timeout" if record.status == "timeout" else f"exit {record.exit}"
            lines += [
                f"$ {record.run}",
                f"# {record.check}: {record.status}, {shown}, {record.duration_s:.2f} s"
                + (f" ({record.reason})" if record.reason else ""),
                _output_text(output).rstrip("\n"),
                "",
            ]
        return redact("\n".join(lines) + "\n")


OpenShell = Callable[[str], Awaitable["Shell | Outcome"]]
StepProgress = Callable[[str, StepRecord], None]


def _output_text(output: bytes) -> str:
    """A step's output as text, secrets redacted. Output cut at MAX_STEP_OUTPUT loses its first,
    partial line: the end of a token is no longer a token's shape."""
    text = output.decode("utf-8", "replace")
    if len(output) >= MAX_STEP_OUTPUT:
        text = text.partition("\n")[2]
    return redact(text)


def _tail(output: bytes) -> str | None:
    text = _output_text(output).strip()
    if not text:
        return None
    return text[-TAIL_CHARS:]


async def apply_host(
    planned: FixHost,
    open_shell: OpenShell,
    options: ApplyOptions,
    stop: asyncio.Event,
    on_step: StepProgress | None = None,
) -> tuple[FixHost, Transcript]:
    """Run the planned steps of one pod over one shell session. Every step ends ran, failed,
    timeout or skipped; a dropped connection skips the rest, never another pod's steps."""
    transcript = Transcript(planned.name)
    todo = [s for s in planned.steps if s.status == "planned"]
    if not todo:
        return planned, transcript
    if stop.is_set():
        return _skip_rest(planned, "interrupted before it started"), transcript
    shell = await _unless_stopped(open_shell(planned.name), stop)
    if shell is None:
        return _skip_rest(planned, "interrupted while connecting"), transcript
    if isinstance(shell, Outcome):
        why = redact(shell.reason)
        host = _skip_rest(planned, f"no session: {why}")
        return host.model_copy(update={"status": shell.status, "reason": why}), transcript
    done: list[StepRecord] = []
    failed_findings: set[tuple[str, str | None]] = set()
    gone: str | None = None
    try:
        for record in planned.steps:
            key = (record.check, record.subject)
            if record.status != "planned":
                done.append(record)
                continue
            reason = gone or (
                "interrupted"
                if stop.is_set()
                else "an earlier step of this fix failed"
                if key in failed_findings
                else None
            )
            if reason:
                done.append(record.model_copy(update={"status": "skipped", "reason": reason}))
                continue
            run = await shell.run(record.run, options.step_timeout, stop)
            finished = _finished(record, run, options.step_timeout)
            if finished.status != "ran":
                failed_findings.add(key)
            if run.lost:
                gone = f"the connection dropped: {redact(run.lost)}"
            done.append(finished)
            transcript.entries.append((finished, run.output[-MAX_STEP_OUTPUT:]))
            if on_step is not None:
                on_step(planned.name, finished)
    finally:
        await shell.close()
    return planned.model_copy(update={"steps": done}), transcript


def _finished(record: StepRecord, run: StepRun, timeout_s: float) -> StepRecord:
    update: dict[str, Any] = {
        "exit": run.exit,
        "duration_s": round(run.duration_s, 3),
        "output_tail": _tail(run.output),
    }
    if run.timed_out:
        update.update(status="timeout", reason=f"still running after --step-timeout {timeout_s:g} s: stopped")
    elif run.interrupted:
        update.update(status="failed", reason="interrupted: TERM sent to the step")
    elif run.lost:
        update.update(status="failed", reason=f"the connection dropped: {redact(run.lost)}")
    elif run.exit != 0:
        refusal = _refusal(run.output)
        update.update(status="failed", reason=f"exited {run.exit}" + (f": refused: {refusal}" if refusal else ""))
    else:
        update.update(status="ran")
    return record.model_copy(update=update)


def _refusal(output: bytes) -> str | None:
    """Why a file edit refused to write (evaluate.file_edits), from the step's last such line."""
    lines = [line for line in _output_text(output).splitlines() if line.startswith(REFUSED)]
    return one_line(lines[-1][len(REFUSED) :], 300) if lines else None


async def _unless_stopped(opening: Awaitable[Shell | Outcome], stop: asyncio.Event) -> Shell | Outcome | None:
    """The session `opening` gives, or None once `stop` is set first: a Ctrl-C never waits out a
    connect timeout (a pod that accepts and then says nothing holds a connect for its whole limit)."""
    task = asyncio.ensure_future(opening)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return None


def _skip_rest(host: FixHost, reason: str) -> FixHost:
    steps = [
        s.model_copy(update={"status": "skipped", "reason": reason}) if s.status == "planned" else s for s in host.steps
    ]
    return host.model_copy(update={"steps": steps})


def executed(host: FixHost) -> bool:
    """Something ran on the pod (or may have: a step that failed or timed out), so it is re-probed."""
    return any(s.status in ("ran", "failed", "timeout") for s in host.steps)


# ---------------------------------------------------------------- judging


def judge(applied: FixHost, before: HostReport, after: HostReport | None, interrupted: bool = False) -> FixHost:
    """Each finding's outcome: fixed (gone after the re-probe), still_failing (steps ran, it
    is still there), failed (a step failed or timed out), skipped (nothing ran for it, and it is
    still there); findings that appeared after the steps are `new`. A re-probe answered by
    another machine proves nothing: every finding is `failed`, saying how the machine differs."""
    if before.status is not HostStatus.OK:
        return applied
    if after is not None and after.status is not HostStatus.OK:
        why = f"the re-probe failed: {after.reason}"
        results = [_result(f, "failed", reason=why) for f in problems(before)]
        return applied.model_copy(update={"results": results, "status": after.status, "reason": after.reason})
    changes = machine_changes(before, after) if after is not None else []
    if changes:
        why = f"the re-probe answered from another machine ({'; '.join(changes)}): it proves nothing here"
        results = [_result(f, "failed", reason=why) for f in problems(before)]
        return applied.model_copy(update={"results": results, "reason": why})
    remaining = {(f.check, f.subject): f for f in problems(after)} if after is not None else None
    results = []
    for finding in problems(before):
        key = (finding.check, finding.subject)
        mine = [s for s in applied.steps if (s.check, s.subject) == key]
        bad = [s for s in mine if s.status in ("failed", "timeout")]
        ran = [s for s in mine if s.status == "ran"]
        still = remaining.get(key) if remaining is not None else finding
        after_severity = still.severity if still is not None else None
        if bad:
            outcome, reason, tail = "failed", bad[0].reason, bad[0].output_tail
        elif ran and interrupted and after is None:
            outcome, reason, tail = "still_failing", "interrupted before the re-probe: not proven", ran[-1].output_tail
        elif ran and still is None:
            outcome, reason, tail = "fixed", None, None
        elif ran and still is not None:
            outcome, reason, tail = (
                "still_failing",
                f"the steps ran; still: {one_line(still.message, 200)}",
                ran[-1].output_tail,
            )
        elif still is None and remaining is not None:
            outcome, reason, tail = "fixed", "gone after the other fixes on this pod", None
        else:
            outcome, reason, tail = "skipped", _skip_reason(finding, applied.refused, applied.steps), None
        results.append(
            FindingResult(
                check=finding.check,
                subject=finding.subject,
                before=finding.severity,
                after=after_severity,
                outcome=outcome,
                reason=reason,
                output_tail=tail,
            )
        )
    if remaining is not None:
        known = {(f.check, f.subject) for f in problems(before)}
        for key, finding in remaining.items():
            if key not in known:
                results.append(
                    FindingResult(
                        check=finding.check,
                        subject=finding.subject,
                        after=finding.severity,
                        outcome="new",
                        reason=one_line(finding.message, 200),
                    )
                )
    return applied.model_copy(update={"results": results})


def summarize(hosts: Sequence[FixHost]) -> FixSummary:
    summary = FixSummary()
    for host in hosts:
        if host.status is not HostStatus.OK:
            summary.not_checked += 1
        for result in host.results:
            setattr(summary, result.outcome, getattr(summary, result.outcome) + 1)
    return summary


def same_pods(targets: Sequence[Target]) -> list[list[int]]:
    """The targets' indices grouped by pod, in the targets' order: names with the same provider
    pod id, or the same SSH endpoint (host, port, user and the way there), are one pod."""
    first: dict[tuple[object, ...], int] = {}
    lead = list(range(len(targets)))

    def find(i: int) -> int:
        while lead[i] != i:
            i = lead[i]
        return i

    for i, target in enumerate(targets):
        keys: list[tuple[object, ...]] = [
            ("ssh", target.host.lower(), target.port, target.user or "", target.proxy_jump or "",
             target.proxy_command or "", tuple(sorted(target.probe_roots.items())))
        ]  # fmt: skip
        if target.provider is not None:
            keys.append(("provider", target.provider.provider, target.provider.pod_id))
        for key in keys:
            if key in first:
                a, b = find(first[key]), find(i)
                lead[max(a, b)] = min(a, b)
            else:
                first[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(targets)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def write_transcripts(directory: Path, transcripts: Sequence[Transcript]) -> list[Path]:
    """Each pod's transcript in its own new file (mode 0600: it holds what ran as root), named
    by files.file_name_for. An existing file is never replaced or written through: the next
    free `NAME~2.log`, `NAME~3.log`... is taken instead. Returns the files written."""
    from computefence.errors import ConfigError

    written: list[Path] = []
    if any(t.entries for t in transcripts):
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--log {directory}: {exc.strerror or exc}") from None
    for transcript in transcripts:
        if transcript.entries:
            written.append(_write_new(directory, file_name_for(transcript.name), transcript.text()))
    return written


_MAX_RUNS = 1000


def _write_new(directory: Path, stem: str, text: str) -> Path:
    from computefence.errors import ConfigError

    data = text.encode("utf-8", "replace")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for run in range(1, _MAX_RUNS + 1):
        path = directory / (f"{stem}.log" if run == 1 else f"{stem}~{run}.log")
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"--log {path}: {exc.strerror or exc}") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError as exc:
            path.unlink(missing_ok=True)
            raise ConfigError(f"--log {path}: {exc.strerror or exc}") from None
        return path
    raise ConfigError(f"--log {directory}: {_MAX_RUNS} transcripts of {stem} are already there")


async def apply_all(
    plans: Sequence[FixHost],
    open_shell: OpenShell,
    options: ApplyOptions,
    stop: asyncio.Event,
    on_step: StepProgress | None = None,
) -> list[tuple[FixHost, Transcript]]:
    """apply_host on every pod, at most options.concurrency at once, in the plans' order.
    A bug on one pod fails that pod's remaining steps, never another pod's."""
    semaphore = asyncio.Semaphore(max(1, options.concurrency))

    async def one(planned: FixHost) -> tuple[FixHost, Transcript]:
        async with semaphore:
            try:
                return await apply_host(planned, open_shell, options, stop, on_step)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # this pod's result, not the fleet's
                why = f"internal error: {type(exc).__name__}: {one_line(redact(str(exc)), 160)}"
                return _skip_rest(planned, why), Transcript(planned.name)

    return list(await asyncio.gather(*(one(p) for p in plans)))
