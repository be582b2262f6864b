"""Prometheus text exposition format, for node_exporter's textfile collector.

Cron use: `computefence fleet check --format prometheus --output
/var/lib/node_exporter/textfile/computefence.prom` (the file is replaced atomically).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from computefence.evaluate.checks.watch_checks import Progress, gpu_means, progress
from computefence.evaluate.fleet import ready_hosts
from computefence.models import Facts, HostReport, HostStatus, Report, Severity
from computefence.render import views
from computefence.render.interface import Renderer
from computefence.text import clean

_VERDICT_VALUE = {Severity.PASS: 0, Severity.WARN: 1, Severity.BLOCK: 2}


def label_value(value: object) -> str:
    # The exposition format escapes exactly backslash, double quote and newline.
    text = clean(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{key}="{label_value(value)}"' for key, value in labels.items()) + "}"


def _number(value: float) -> str:
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if isinstance(value, float) else str(value)


class _Exposition:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, help_text: str, samples: list[tuple[dict[str, Any], float]]) -> None:
        if not samples:
            return
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            self.lines.append(f"{name}{_labels(**labels) if labels else ''} {_number(value)}")


def render(report: Report) -> str:
    out = _Exposition()
    s = report.summary
    hosts = report.hosts

    out.family(
        "computefence_host_up",
        "1 if the probe ran on the host and returned facts, 0 if the host could not be checked.",
        [({"host": h.name, "status": h.status.value}, 1 if h.status is HostStatus.OK else 0) for h in hosts],
    )
    if report.kind == "watch":
        _watch_families(out, report)
    else:
        out.family(
            "computefence_host_info",
            "Versions found on the host (value is always 1).",
            [({"host": h.name, **_info(h, h.facts)}, 1) for h in hosts if h.facts is not None],
        )
    findings: list[tuple[dict[str, Any], float]] = []
    for h in hosts:
        counts: dict[str, dict[Severity, int]] = {}
        for f in h.findings:
            per_check = counts.setdefault(f.check, dict.fromkeys(Severity, 0))
            per_check[f.severity] += 1
        for check, per_sev in counts.items():
            findings += [({"host": h.name, "check": check, "severity": sev.value}, n) for sev, n in per_sev.items()]
    out.family("computefence_findings", "Findings per host, check and severity.", findings)
    checked = [h for h in hosts if h.status is HostStatus.OK]
    out.family(
        "computefence_blockers", "Blocking findings on the host.", [({"host": h.name}, h.blockers) for h in checked]
    )
    out.family("computefence_warnings", "Warnings on the host.", [({"host": h.name}, h.warnings) for h in checked])
    ready = {h.name for h in ready_hosts(report)}
    out.family(
        "computefence_host_ready",
        "1 if a job can start on the host (what --healthy-out lists), else 0.",
        [({"host": h.name}, int(h.name in ready)) for h in hosts],
    )
    out.family(
        "computefence_host_cost_per_hour_dollars",
        "The provider's hourly price for the host.",
        [
            ({"host": h.name}, float(h.provider.cost_per_hour))
            for h in hosts
            if h.provider and h.provider.cost_per_hour is not None
        ],
    )
    out.family(
        "computefence_hosts",
        "Hosts in the run by their worst state (warned: warnings and no blocker).",
        [
            ({"state": "blocked"}, s.hosts_blocked),
            ({"state": "warned"}, s.hosts_warned),
            ({"state": "clean"}, s.hosts_clean),
            ({"state": "not_checked"}, s.not_ok),
        ],
    )
    if s.cost_per_hour_at_risk is not None:
        out.family(
            "computefence_cost_per_hour_at_risk_dollars",
            "Hourly price of the hosts whose jobs are at risk.",
            [({}, float(s.cost_per_hour_at_risk))],
        )
    if report.changes is not None:
        c = report.changes
        out.family(
            "computefence_changes",
            "Changes since the last run in --history, by kind.",
            [
                ({"kind": "new_blockers"}, sum(1 for x in c.new if x.severity_after is Severity.BLOCK)),
                ({"kind": "new_warnings"}, sum(1 for x in c.new if x.severity_after is Severity.WARN)),
                ({"kind": "cleared"}, len(c.cleared)),
                ({"kind": "status"}, len(c.status)),
                ({"kind": "appeared"}, len(c.appeared)),
                ({"kind": "vanished"}, len(c.vanished)),
                ({"kind": "versions"}, len(c.versions)),
            ],
        )
    out.family(
        "computefence_verdict", "Verdict of the run: 0 pass, 1 warn, 2 block.", [({}, _VERDICT_VALUE[s.verdict])]
    )
    timestamp = _epoch(report.generated_at)
    if timestamp is not None:
        out.family(
            "computefence_last_run_timestamp_seconds",
            "When the run's report was generated (Unix time).",
            [({}, timestamp)],
        )
    return "\n".join(out.lines) + "\n"


def _watch_families(out: _Exposition, report: Report) -> None:
    """`fleet watch`: each pod's run as gauges (step, loss, GPU utilisation, ...)."""
    runs = [
        (h, p)
        for h in report.hosts
        if h.status is HostStatus.OK and h.facts is not None and (p := progress(h.facts)) is not None
    ]

    def each(value_of: Callable[[HostReport, Progress], float | None]) -> list[tuple[dict[str, Any], float]]:
        return [({"host": h.name}, v) for h, p in runs if (v := value_of(h, p)) is not None]

    out.family(
        "computefence_watch_training_processes",
        "Training processes found on the host (torchrun, accelerate, deepspeed, python train...).",
        each(_training_processes),
    )
    out.family("computefence_watch_step", "The run's current step.", each(lambda h, p: p.step))
    out.family("computefence_watch_max_steps", "The run's max_steps.", each(lambda h, p: p.max_steps))
    out.family(
        "computefence_watch_seconds_per_step", "Seconds per training step.", each(lambda h, p: p.seconds_per_step)
    )
    out.family(
        "computefence_watch_seconds_left",
        "Seconds to max_steps at the current pace.",
        each(lambda h, p: p.seconds_left),
    )
    out.family(
        "computefence_watch_loss",
        "The last logged training loss (NaN when the loss is NaN).",
        each(lambda h, p: _loss(p.last_loss)),
    )
    out.family(
        "computefence_watch_checkpoint_age_seconds",
        "Seconds since the newest checkpoint was written (pod clock).",
        each(lambda h, p: p.newest_checkpoint_age_s),
    )
    out.family(
        "computefence_watch_gpu_utilization_percent",
        "Mean GPU utilisation over the probe's sampling window.",
        [
            ({"host": h.name, "gpu": index}, round(value, 1))
            for h, _ in runs
            if h.facts is not None and h.facts.watch is not None
            for index, value in gpu_means(h.facts.watch).items()
        ],
    )


def _loss(value: float | str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _training_processes(host: HostReport, progress: Progress) -> float | None:
    watch = host.facts.watch if host.facts is not None else None
    return len(watch.processes.processes) if watch is not None else None


def _info(host: HostReport, facts: Facts) -> dict[str, str]:
    return {
        "provider": host.provider.provider if host.provider else "",
        "driver": facts.gpu.driver_version or "",
        "cuda_driver": facts.gpu.cuda_version or "",
        "torch": facts.torch.version or "",
        "torch_cuda": facts.torch.cuda_build or "",
        "gpus": views.gpu_cell(host),
    }


def _epoch(generated_at: str) -> float | None:
    try:
        return datetime.fromisoformat(generated_at).timestamp()
    except ValueError:
        return None


class PrometheusRenderer(Renderer):
    """`--format prometheus`: the text exposition format, for node_exporter's textfile collector."""

    def render(self, report: Report) -> str:
        return render(report)
