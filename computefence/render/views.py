"""Presentation helpers shared by the renderers: grouping, table cells, wording.

Nothing here decides a verdict; it arranges what report.summary and the findings say.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from computefence.evaluate.checks.areas import area_of, area_sort_key
from computefence.evaluate.checks.gpu_perf import saved_fleet_figures
from computefence.evaluate.fleet import fails, give_back, replace_blockers
from computefence.models import (
    Changes,
    DatasetFacts,
    Finding,
    Fix,
    FixStep,
    HostReport,
    HostStatus,
    HostVerdict,
    Report,
    Severity,
    SourceStatus,
    StepKind,
    StepPlace,
    Summary,
)
from computefence.text import one_line, plural

SEVERITY_LABEL = {Severity.BLOCK: "BLOCK", Severity.WARN: "WARN", Severity.PASS: "pass", Severity.SKIP: "skip"}


# ---------------------------------------------------------------- findings


def by_area(findings: list[Finding]) -> list[tuple[str, list[Finding]]]:
    """Findings per check area, areas in a fixed order, worst findings first in each."""
    areas: dict[str, list[Finding]] = {}
    for finding in findings:
        areas.setdefault(area_of(finding.check), []).append(finding)
    return [
        (area, sorted(items, key=lambda f: (-f.severity.rank, f.check)))
        for area, items in sorted(areas.items(), key=lambda kv: area_sort_key(kv[0]))
    ]


def severity_counts(findings: list[Finding]) -> dict[Severity, int]:
    counts = Counter(f.severity for f in findings)
    return {sev: counts.get(sev, 0) for sev in (Severity.BLOCK, Severity.WARN, Severity.PASS, Severity.SKIP)}


def step_mark(step: FixStep) -> str | None:
    """How a step that is not a safe pod step is marked: where it runs and what it risks
    ("local", "inspect", "local, disruptive"); None for a safe step on the pod."""
    if step.on is StepPlace.POD and step.kind is StepKind.SAFE:
        return None
    parts = ["local"] if step.on is StepPlace.LOCAL else []
    if step.kind is not StepKind.SAFE and not (parts and step.kind is StepKind.INSPECT):
        parts.append(step.kind.value)
    return ", ".join(parts)


def marked_command(step: FixStep) -> str:
    """The command with its mark as a trailing shell comment, so the line still pastes as it is."""
    mark = step_mark(step)
    return f"{step.run}  # {mark}" if mark else step.run


def has_fix(finding: Finding) -> bool:
    """A warning or blocker with something to do about it."""
    return bool(finding.fix) and finding.severity in (Severity.WARN, Severity.BLOCK)


_SUBJECT = "\x00subject\x00"  # NUL-delimited: not something a message says


@dataclass
class Variant:
    """One wording of a finding and the pods that got it. Where the wording embeds the
    pod's own subject (a path), that part is a placeholder, so the same finding about
    different paths on 40 pods is still one variant, with each pod's path listed."""

    message_template: str
    fix_template: Fix | None
    # (host name, subject) pairs; subject is the per-pod value (a path, a GPU index).
    hosts: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def subjects(self) -> set[str | None]:
        return {subject for _, subject in self.hosts}

    @property
    def pods(self) -> list[tuple[str, list[str]]]:
        """Each pod once, in order, with its subjects: a pod with the finding about two paths
        (two output dirs on the overlay) is one pod that names both."""
        by_pod: dict[str, list[str]] = {}
        for name, subject in self.hosts:
            subjects = by_pod.setdefault(name, [])
            if subject and subject not in subjects:
                subjects.append(subject)
        return list(by_pod.items())

    def _fill(self, template: str) -> str:
        subjects = self.subjects
        if len(subjects) == 1:
            value = subjects.pop() or ""
        else:
            paths = all(s and s.startswith("/") for s in subjects)
            value = "<path>" if paths else "<value>"
        return template.replace(_SUBJECT, value)

    @property
    def message(self) -> str:
        return self._fill(self.message_template)

    @property
    def fix(self) -> Fix | None:
        if self.fix_template is None:
            return None
        advice = self.fix_template.advice
        return Fix(
            steps=[step.model_copy(update={"run": self._fill(step.run)}) for step in self.fix_template.steps],
            advice=self._fill(advice) if advice else None,
        )


def _template(text: str | None, subject: str | None) -> str | None:
    # Short subjects ("0" for a GPU index) would also match unrelated digits and words.
    if text is None or not subject or len(subject) < 3:
        return text
    return text.replace(subject, _SUBJECT)


def _fix_template(fix: Fix | None, subject: str | None) -> Fix | None:
    if not fix:
        return None
    steps = [step.model_copy(update={"run": _template(step.run, subject)}) for step in fix.steps]
    return Fix(steps=steps, advice=_template(fix.advice, subject))


@dataclass
class FindingGroup:
    check: str
    severity: Severity
    variants: list[Variant] = field(default_factory=list)

    @property
    def host_names(self) -> list[str]:
        names: list[str] = []
        for variant in self.variants:
            for name, _ in variant.hosts:
                if name not in names:
                    names.append(name)
        return names


def group_findings(
    hosts: list[HostReport], severities: tuple[Severity, ...] = (Severity.BLOCK, Severity.WARN)
) -> list[FindingGroup]:
    """Findings grouped across pods: one group per (check, severity), and inside it one
    variant per distinct wording, so the same finding on 40 pods shows once. Groups come
    worst first, then by how many pods they hit."""
    groups: dict[tuple[str, Severity], FindingGroup] = {}
    for host in hosts:
        for finding in host.findings:
            if finding.severity not in severities:
                continue
            group = groups.setdefault((finding.check, finding.severity), FindingGroup(finding.check, finding.severity))
            message = _template(finding.message, finding.subject) or ""
            fix = _fix_template(finding.fix, finding.subject)
            # A fix that names the pod's own path stays with that path: a command is pasted as shown.
            own = fix is not None and any(_SUBJECT in step.run for step in fix.steps)
            variant = next(
                (
                    v
                    for v in group.variants
                    if v.message_template == message
                    and v.fix_template == fix
                    and (not own or v.subjects == {finding.subject})
                ),
                None,
            )
            if variant is None:
                variant = Variant(message, fix)
                group.variants.append(variant)
            variant.hosts.append((host.name, finding.subject))
    for group in groups.values():
        group.variants.sort(key=lambda v: -len(v.pods))
    return sorted(groups.values(), key=lambda g: (-g.severity.rank, -len(g.host_names), g.check))


def hosts_with_subjects(variant: Variant, sep: str = ", ") -> str:
    """'pod-a, pod-b' or, where the subject differs between pods, 'pod-a: /data, pod-b: /mnt'
    (joined by `sep`)."""
    if len(variant.subjects) <= 1:
        return ", ".join(name for name, _ in variant.pods)
    return sep.join(f"{name}: {', '.join(subjects)}" if subjects else name for name, subjects in variant.pods)


# ---------------------------------------------------------------- applied files


def applied_line(report: Report) -> str | None:
    """'policy ./computefence.yaml (sha256 1a2b3c4d5e6f)', and the baseline, when a run applied them."""
    parts = [
        f"{what} {one_line(applied.path)} (sha256 {applied.sha256[:12]})"
        for what, applied in (("policy", report.policy), ("baseline", report.baseline))
        if applied is not None
    ]
    return " · ".join(parts) or None


# ---------------------------------------------------------------- version drift

# Pods named per value of a drift row before the rest are counted.
# Reports of many pods (a pod table, findings grouped across pods).
FLEET_KINDS = ("fleet", "watch")

DRIFT_NAMES = 5


def drift_cells(values: dict[str, list[str]], names: int = DRIFT_NAMES) -> list[tuple[str, str]]:
    """(value, pods) per value of a drift row, most common first. A strict majority shows as
    a count ("37 pods"): only the odd pods are named, and a long list ends in "and N more"."""
    ordered = sorted(values.items(), key=lambda kv: -len(kv[1]))
    total = sum(len(hosts) for _, hosts in ordered)
    cells = []
    for i, (value, hosts) in enumerate(ordered):
        if i == 0 and len(hosts) > 1 and len(hosts) * 2 > total:
            cells.append((value, plural(len(hosts), "pod")))
            continue
        shown = ", ".join(hosts[:names])
        cells.append((value, shown + (f" and {len(hosts) - names} more" if len(hosts) > names else "")))
    return cells


# ---------------------------------------------------------------- host cells


def host_state(host: HostReport) -> str:
    """'ok' hosts by their worst finding, others by their status."""
    if host.status is not HostStatus.OK:
        return str(host.status.value)
    if host.blockers:
        return "blocked"
    if host.warnings:
        return "warnings"
    return "ready"


def provider_cell(host: HostReport) -> str:
    if host.provider is None:
        return "-"
    return host.provider.provider


def gpu_cell(host: HostReport) -> str:
    facts = host.facts
    if facts is not None and facts.gpu.gpus:
        names = Counter(_short_gpu_name(g.name) for g in facts.gpu.gpus)
        return ", ".join(f"{count}x {name}" for name, count in names.items())
    if facts is not None and facts.gpu.nvidia_smi_found and (facts.gpu.exit_code or facts.gpu.timed_out):
        return "driver error"
    if host.provider is not None and host.provider.gpu_count:
        return f"{host.provider.gpu_count}x {_short_gpu_name(host.provider.gpu_type or 'GPU')}"
    return "none" if facts is not None else "-"


def _short_gpu_name(name: str) -> str:
    return name[len("NVIDIA ") :] if name.startswith("NVIDIA ") else name


def torch_cell(host: HostReport) -> str:
    facts = host.facts
    if facts is None:
        return "-"
    torch = facts.torch
    if not torch.importable:
        return "torch missing" if torch.python_found else "no interpreter"
    version = torch.version or "?"
    if "+cu" in version or "+cpu" in version or "+rocm" in version:
        return version  # the local version already names the build
    cuda = (
        f"CUDA {torch.cuda_build}"
        if torch.cuda_build
        else ("ROCm " + torch.hip_build if torch.hip_build else "CPU build")
    )
    return f"{version} / {cuda}"


def machine_line(host: HostReport) -> str:
    """One line about the machine (or, for a dataset-only check, the file) for the header."""
    facts = host.facts
    if facts is None:
        return ""
    if "gpu" not in facts.collectors and facts.dataset is not None:
        return dataset_line(facts.dataset)
    ident = facts.identity
    parts = []
    if ident.os_release.pretty_name:
        parts.append(ident.os_release.pretty_name)
    if ident.kernel:
        parts.append(f"kernel {ident.kernel}")
    if ident.cpu_count:
        parts.append(plural(ident.cpu_count, "CPU"))
    if ident.mem_total_bytes:
        parts.append(f"{ident.mem_total_bytes / 1e9:.0f} GB RAM")
    parts.append(f"GPUs: {gpu_cell(host)}")
    if facts.gpu.driver_version:
        parts.append(f"driver {facts.gpu.driver_version} (CUDA {facts.gpu.cuda_version or '?'})")
    parts.append(f"torch: {torch_cell(host)}")
    return " · ".join(parts)


def dataset_line(data: DatasetFacts) -> str:
    parts = [data.path]
    if data.format:
        parts.append(data.format + (f" ({data.compression})" if data.compression else ""))
    total = data.rows + data.unreadable_rows
    # The same count as dataset.unreadable's: all rows, the unreadable ones among them.
    rows = f"{total:,} {'row' if total == 1 else 'rows'}"
    parts.append(f"{rows} ({data.unreadable_rows:,} unreadable)" if data.unreadable_rows else rows)
    if data.input_column or data.label_column:
        parts.append(f"input {data.input_column or '-'}, label {data.label_column or '-'}")
    return " · ".join(parts)


# ---------------------------------------------------------------- wording


_WATCH_WORDS = {Severity.BLOCK: "FAILING", Severity.WARN: "WARNINGS", Severity.PASS: "HEALTHY"}


def verdict_word(report: Report) -> str:
    if report.interrupted:
        return "INTERRUPTED"
    if report.kind == "watch":
        return _WATCH_WORDS[report.summary.verdict]
    return run_verdict_word(report.summary.verdict, report.fail_on)


def run_verdict_word(verdict: Severity, fail_on: Severity) -> str:
    if verdict is Severity.BLOCK:
        return "BLOCKED"
    if verdict is Severity.WARN:
        return "FAILED ON WARNINGS" if fails(verdict, fail_on) else "READY WITH WARNINGS"
    return "READY"


def verdict_detail(report: Report) -> str:
    if report.interrupted:
        return "stopped before every pod was checked: " + _counts_detail(report)
    return _counts_detail(report)


def _counts_detail(report: Report) -> str:
    s = report.summary
    if report.kind not in FLEET_KINDS:
        host = report.hosts[0] if report.hosts else None
        if host is not None and host.status is not HostStatus.OK:
            return f"{host.status.value}: {one_line(host.reason or '')}".rstrip(": ")
        skipped = f", {s.skipped} skipped" if s.skipped else ""
        return f"{plural(s.blockers, 'blocker')}, {plural(s.warnings, 'warning')}, {s.passed} passed{skipped}"
    watch = report.kind == "watch"
    parts: list[str] = []
    # "N of M pods" goes with the count the verdict rests on: the blocked pods, or, where none
    # is blocked, the pods not checked (never "FAILING 0 of 6 pods failing").
    lead = "not-checked" if not s.hosts_blocked and s.not_ok and not report.allow_unreachable else "blocked"
    for label, count, key in pod_counts(s, watch=watch):
        if key == lead:
            parts.insert(0, f"{count} of {plural(s.hosts, 'pod')} {label}")
        elif key == "blocked" and not count:
            continue
        elif key != "not-checked" or count:
            parts.append(
                f"{count} {label}" + (" (allowed)" if key == "not-checked" and report.allow_unreachable else "")
            )
    return ", ".join(parts)


def pod_counts(summary: Summary, *, watch: bool = False) -> list[tuple[str, int, str]]:
    """(words, count, verdict key) for each kind of pod, worst first: the one wording of
    report.summary's pod counts, for the verdict line and the HTML tiles alike. A pod counts
    once, under its worst finding, so the warnings count is of pods with warnings only (a
    blocked pod's warnings are counted with it as blocked)."""
    return [
        ("failing" if watch else "blocked", summary.hosts_blocked, "blocked"),
        ("not reached" if watch else "not checked", summary.not_ok, "not-checked"),
        ("with warnings only", summary.hosts_warned, "warnings"),
        ("healthy" if watch else "clean", summary.hosts_clean, "ready"),
    ]


def money_line(report: Report) -> str | None:
    """'3 blocked pods burn $7.47/h (of $12.40/h for the fleet)', or None without prices."""
    s = report.summary
    if s.cost_per_hour_at_risk is None and s.cost_per_hour_total is None:
        return None
    at_risk = s.cost_per_hour_at_risk or 0.0
    n = s.hosts_at_risk_priced
    # The evaluator prices pods that are blocked and, as they bill too, pods not checked.
    what = "blocked or unchecked" if s.not_ok else "blocked"
    line = f"{n} {what} {'pod burns' if n == 1 else 'pods burn'} ${at_risk:.2f}/h"
    if s.cost_per_hour_total is not None:
        line += f" (of ${s.cost_per_hour_total:.2f}/h for the fleet)"
    return line


@dataclass
class GiveBackRow:
    """A pod blocked by a machine fault: what it costs and which checks condemn it."""

    name: str
    cost: str
    checks: str


def give_back_rows(report: Report) -> list[GiveBackRow]:
    """'Give these pods back': the pods only another machine helps, priciest first."""
    hosts = sorted(give_back(report), key=lambda h: -((h.provider.cost_per_hour if h.provider else None) or 0.0))
    rows = []
    for host in hosts:
        cost = host.provider.cost_per_hour if host.provider is not None else None
        checks = ", ".join(dict.fromkeys(f.check for f in replace_blockers(host)))
        rows.append(GiveBackRow(host.name, f"${cost:.2f}/h" if cost is not None else "-", checks))
    return rows


def give_back_title(report: Report) -> str:
    """'Give these pods back · 5 pods · $6.45/h'."""
    hosts = give_back(report)
    prices = [
        h.provider.cost_per_hour for h in hosts if h.provider is not None and h.provider.cost_per_hour is not None
    ]
    return f"Give these pods back · {plural(len(hosts), 'pod')}" + (f" · ${sum(prices):.2f}/h" if prices else "")


GIVE_BACK_NOTE = (
    "the machine itself is at fault, no command on the pod helps: "
    "`computefence fleet release --from REPORT.json` stops them (REPORT.json from fleet check --format json -o)"
)
# Up to this many pods to give back are listed; the rest are counted (fleet release lists all).
GIVE_BACK_NAMED = 20


# Up to this many ready pods are named in the summary; more are for --healthy-out.
READY_NAMED = 20
_VERDICT_ORDER = {HostVerdict.BLOCKED: 0, HostVerdict.NOT_CHECKED: 1, HostVerdict.WARNINGS: 2, HostVerdict.READY: 3}


def ready_line(report: Report) -> str | None:
    """Which pods can take a job now: their names when there are few, else where to get them."""
    if report.kind != "fleet":
        return None
    ready = [h.name for h in report.hosts if h.verdict is HostVerdict.READY]
    if not ready:
        return None
    if len(ready) <= READY_NAMED:
        return f"Ready: {', '.join(ready)}"
    return f"{len(ready)} pods ready: --healthy-out FILE writes their names"


def hosts_worst_first(hosts: list[HostReport]) -> list[HostReport]:
    """Blocked, not checked, with warnings, ready; the run's order within each."""
    return sorted(hosts, key=lambda h: _VERDICT_ORDER[h.verdict])


def not_ok_hosts(report: Report) -> list[HostReport]:
    return [h for h in report.hosts if h.status is not HostStatus.OK]


def failed_sources(report: Report) -> list[SourceStatus]:
    return [s for s in report.sources if not s.ok]


# ---------------------------------------------------------------- since the last run


@dataclass
class ChangeLine:
    label: str  # "new blocker", "cleared warning", "appeared", "vanished", "connection", "version"
    host: str
    text: str
    fix: Fix | None = None
    # True: worse than last run, False: better, None: neither.
    worse: bool | None = None


_SEVERITY_WORD = {Severity.BLOCK: "blocker", Severity.WARN: "warning"}


def _finding_word(severity: Severity | None) -> str:
    return _SEVERITY_WORD[severity] if severity else "finding"


def since_title(changes: Changes) -> str:
    return f"Since the last run ({one_line(changes.since)})"


def change_lines(changes: Changes) -> list[ChangeLine]:
    """Every change as one line, worst news first: new blockers, pods lost, new warnings, then
    recoveries, cleared findings, pods appeared, version changes."""
    lines: list[ChangeLine] = []
    for c in changes.new:
        was = f" (was {c.severity_before.value})" if c.severity_before else ""
        text = f"{one_line(c.finding.check)}: {one_line(c.finding.message)}{was}"
        lines.append(ChangeLine(f"new {_finding_word(c.severity_after)}", c.host, text, fix=c.finding.fix, worse=True))
    for s in changes.status:
        reason = f": {one_line(s.reason)}" if s.reason and s.after is not HostStatus.OK else ""
        worse = None if HostStatus.OK not in (s.before, s.after) else s.after is not HostStatus.OK
        lines.append(ChangeLine("connection", s.host, f"{s.before.value} → {s.after.value}{reason}", worse=worse))
    lines += [ChangeLine("vanished", name, "in the last run, not in this one", worse=True) for name in changes.vanished]
    for c in changes.cleared:
        now = f" (now {c.severity_after.value})" if c.severity_after else ""
        text = f"{one_line(c.finding.check)}{now}"
        lines.append(ChangeLine(f"cleared {_finding_word(c.severity_before)}", c.host, text, worse=False))
    lines += [ChangeLine("appeared", name, "new since the last run") for name in changes.appeared]
    lines += [
        ChangeLine("version", v.host, f"{one_line(v.component)} {one_line(v.before)} → {one_line(v.after)}")
        for v in changes.versions
    ]
    order = {True: 0, None: 2, False: 1}
    return sorted(lines, key=lambda line: order[line.worse])


def changes_count_line(changes: Changes) -> str:
    """'2 new blockers, 1 cleared, 1 pod vanished, ...' or 'nothing changed'."""
    new_blockers = sum(1 for c in changes.new if c.severity_after is Severity.BLOCK)
    parts = [
        plural(new_blockers, "new blocker") if new_blockers else "",
        plural(len(changes.new) - new_blockers, "new warning") if len(changes.new) > new_blockers else "",
        f"{len(changes.cleared)} cleared" if changes.cleared else "",
        plural(len(changes.status), "connection change") if changes.status else "",
        f"{plural(len(changes.vanished), 'pod')} vanished" if changes.vanished else "",
        f"{plural(len(changes.appeared), 'pod')} appeared" if changes.appeared else "",
        plural(len(changes.versions), "version change") if changes.versions else "",
    ]
    return ", ".join(p for p in parts if p) or "nothing changed"


# ---------------------------------------------------------------- fleet watch


def watch_cells(host: HostReport) -> list[str]:
    """Step (and max_steps), pace (and the time to max_steps), last loss, GPU utilisation
    and newest checkpoint of a watched pod; "-" where the pod did not say."""
    from computefence.evaluate.checks.watch_checks import progress

    found = progress(host.facts) if host.status is HostStatus.OK else None
    if found is None:
        return ["-"] * 5
    step = "-" if found.step is None else f"{found.step}" + (f"/{found.max_steps}" if found.max_steps else "")
    pace = "-" if found.seconds_per_step is None else _pace(found.seconds_per_step)
    if found.seconds_left is not None:
        pace += f", {_age(found.seconds_left)} left"
    loss = (
        "-"
        if found.last_loss is None
        else (f"{found.last_loss:.4g}" if isinstance(found.last_loss, float | int) else str(found.last_loss))
    )
    util = "-" if found.gpu_util_pct is None else f"{found.gpu_util_pct:.0f}%"
    ckpt = "-"
    if found.newest_checkpoint:
        age = found.newest_checkpoint_age_s
        ckpt = found.newest_checkpoint + (f" ({_age(age)})" if age is not None else "")
    return [step, pace, loss, util, ckpt]


_WATCH_STATE = {"ready": "healthy", "blocked": "failing"}


def watch_state(host: HostReport) -> str:
    """host_state in a watch's words: a run is healthy or failing, not ready or blocked."""
    state = host_state(host)
    return _WATCH_STATE.get(state, state)


def _pace(seconds: float) -> str:
    return f"{seconds:.1f} s/it" if seconds >= 1 else f"{1 / seconds:.1f} it/s" if seconds > 0 else "-"


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


# ---------------------------------------------------------------- --perf figures

PERF_TITLE = "GPU performance (--perf): each pod beside the median of its GPU model"


@dataclass(frozen=True)
class PerfRow:
    pod: str
    value: float
    share: float  # of the median


@dataclass(frozen=True)
class PerfFigure:
    model: str
    check: str
    unit: str
    median: float
    rows: list[PerfRow]


def perf_figures(report: Report) -> list[PerfFigure]:
    """Each GPU model's measured figure per perf check, every pod beside the model's median."""
    found = []
    for figure in saved_fleet_figures(report.hosts):
        median = figure.median
        rows = [PerfRow(pod, value, value / median if median else 0.0) for pod, value in figure.pods.items()]
        found.append(PerfFigure(figure.model, figure.check, figure.unit, median, rows))
    return found


def perf_number(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"
