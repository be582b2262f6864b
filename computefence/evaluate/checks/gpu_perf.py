"""The --perf canary's figures against what the GPU model should deliver
(providers/hardware/gpu-performance.yaml), and each pod's figures beside the fleet median.

Without --perf there are no perf facts and these checks stay silent; a pod the canary
skipped (GPU memory held by other processes) gets one note.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from computefence.evaluate.context import Context, passed, q, skipped, training_python, warn
from computefence.evaluate.fleet_steps import run_fleet_step
from computefence.evaluate.profiles import profiles_dir, read_data_file
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import CheckOptions, Facts, Finding, Fix, GpuHealth, GpuPerf, HostReport, HostStatus, PerfFacts

CHECKS: dict[str, CheckSpec] = {
    "gpu.perf-compute": CheckSpec(
        "--perf: bf16 matmul reaches 60% of what the GPU model should deliver", Remedy.REPLACE
    ),
    "gpu.perf-pcie": CheckSpec(
        "--perf: pinned host-device copies reach 50% of what the PCIe link should carry", Remedy.REPLACE
    ),
    "gpu.perf-interconnect": CheckSpec(
        "--perf: GPU-to-GPU bandwidth (NCCL all-reduce or P2P) reaches 50% of the expected", Remedy.REPLACE
    ),
}
COMPUTE_SHARE = 0.6
PCIE_SHARE = 0.5
INTERCONNECT_SHARE = 0.5


class _Strict(BaseModel):
    # Built when its data file is first read (--perf, a policy's job): most checks never read it.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class GpuModel(_Strict):
    model: str
    match: list[str]
    peak_tflops: float
    achievable: float
    nvlink_gbps: float | None = None
    pcie_gen: int
    source: str

    @property
    def expected_tflops(self) -> float:
        return self.peak_tflops * self.achievable


class PcieFigures(_Strict):
    lane_gbps: dict[int, float]
    achievable: float
    p2p_achievable: float


class PerformanceData(_Strict):
    pcie: PcieFigures
    nvlink_achievable: float
    gpus: list[GpuModel]

    def model_of(self, name: str | None) -> GpuModel | None:
        for entry in self.gpus:
            if name and any(re.search(pattern, name, re.IGNORECASE) for pattern in entry.match):
                return entry
        return None

    def pcie_gbps(self, gen: int, width: int) -> float | None:
        lane = self.pcie.lane_gbps.get(gen)
        return lane * width * self.pcie.achievable if lane else None


@cache
def load_performance_data(path: Path | None = None) -> PerformanceData:
    path = path or profiles_dir() / "hardware" / "gpu-performance.yaml"
    return read_data_file(path, PerformanceData, "GPU performance data")


def _models(data: PerformanceData) -> Callable[[str | None], GpuModel | None]:
    """data.model_of, its regexes tried once per GPU name rather than once per GPU."""
    seen: dict[str | None, GpuModel | None] = {}

    def model_of(name: str | None) -> GpuModel | None:
        if name not in seen:
            seen[name] = data.model_of(name)
        return seen[name]

    return model_of


def _perf(facts: Facts) -> PerfFacts | None:
    return facts.perf if facts.perf is not None and facts.perf.ran else None


CLOCKS = "nvidia-smi -q -d PERFORMANCE,CLOCK,POWER"


# ---------------------------------------------------------------- gpu.perf-compute


def check_perf_compute(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.perf-compute"
    perf = facts.perf
    if perf is None:
        return []
    if perf.skipped_reason:
        return [skipped(cid, f"performance canary not run: {perf.skipped_reason}")]
    if perf.error and not perf.gpus:
        return [
            warn(
                cid,
                f"performance canary failed: {perf.error}",
                Fix(
                    commands=[f"{q(training_python(facts))} -c 'import torch; torch.ones(1).cuda()'"],
                    advice="a GPU that cannot run a matmul will not train either",
                ),
            )
        ]
    data = load_performance_data()
    model_of = _models(data)
    findings, measured = [], []
    for gpu in perf.gpus:
        if gpu.error:
            findings.append(
                warn(
                    cid,
                    f"GPU {gpu.index}: the canary's matmul failed: {gpu.error}",
                    Fix(
                        commands=[CLOCKS],
                        advice="a GPU that fails a matmul will fail the job too: choose another machine",
                    ),
                    subject=f"GPU {gpu.index}",
                )
            )
            continue
        if gpu.matmul_tflops is None:
            continue
        model = model_of(gpu.name)
        measured.append(gpu.matmul_tflops)
        if model is not None and gpu.matmul_tflops < COMPUTE_SHARE * model.expected_tflops:
            findings.append(
                warn(
                    cid,
                    (
                        f"GPU {gpu.index} ({gpu.name}) reaches {gpu.matmul_tflops:.0f} TFLOPS {gpu.dtype or 'bf16'} matmul, "
                        f"{gpu.matmul_tflops / model.expected_tflops:.0%} of the ~{model.expected_tflops:.0f} a healthy "
                        f"{model.model} delivers"
                    ),
                    Fix(
                        commands=[CLOCKS],
                        advice="gpu.throttle and gpu.power-limit say why when the host slows it; "
                        "otherwise choose another machine",
                    ),
                    subject=f"GPU {gpu.index}",
                )
            )
    if findings or not measured:
        return findings
    models = {name: model_of(name) for name in {g.name for g in perf.gpus}}
    known = {m.model: m for m in models.values() if m is not None}
    if None in models.values():
        reference = " (no reference figure for this GPU model)"
    elif len(known) == 1:
        [model] = known.values()
        reference = f" (a healthy {model.model}: ~{model.expected_tflops:.0f})"
    else:
        reference = ""
    return [passed(cid, f"bf16 matmul {_span(measured)} TFLOPS per GPU{reference}")]


def _span(values: list[float], digits: int = 0) -> str:
    low, high = round(min(values), digits), round(max(values), digits)
    return f"{low:.{digits}f}" if low == high else f"{low:.{digits}f}-{high:.{digits}f}"


# ---------------------------------------------------------------- gpu.perf-pcie


def _health_by_index(facts: Facts) -> dict[int, GpuHealth]:
    """Each GPU's health entry by index (the first for an index listed twice), built once per
    pod: a lookup per GPU over the whole list made a 10,000-GPU answer quadratic."""
    by_index: dict[int, GpuHealth] = {}
    for health in facts.gpu.health:
        by_index.setdefault(health.index, health)
    return by_index


def _link(health_by_index: dict[int, GpuHealth], gpu: GpuPerf, model: GpuModel | None) -> tuple[int, int] | None:
    health = health_by_index.get(gpu.index)
    gen = health.pcie_gen_max if health and health.pcie_gen_max else (model.pcie_gen if model else None)
    width = health.pcie_width_current if health and health.pcie_width_current else 16
    return (gen, width) if gen else None


def check_perf_pcie(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.perf-pcie"
    perf = _perf(facts)
    if perf is None:
        return []
    data = load_performance_data()
    health = _health_by_index(facts)
    model_of = _models(data)
    findings, measured = [], []
    for gpu in perf.gpus:
        if gpu.h2d_gbps is None or gpu.d2h_gbps is None:
            continue
        slowest = min(gpu.h2d_gbps, gpu.d2h_gbps)
        measured.append(slowest)
        link = _link(health, gpu, model_of(gpu.name))
        expected = data.pcie_gbps(*link) if link else None
        gen, lanes = link or (0, 0)
        if expected and slowest < PCIE_SHARE * expected:
            findings.append(
                warn(
                    cid,
                    (
                        f"GPU {gpu.index} copies host-to-device {gpu.h2d_gbps:.1f} GB/s and device-to-host "
                        f"{gpu.d2h_gbps:.1f} GB/s, {slowest / expected:.0%} of the ~{expected:.0f} GB/s a PCIe gen{gen} "
                        f"x{lanes} link carries"
                    ),
                    Fix(
                        commands=[
                            "nvidia-smi --query-gpu=index,pcie.link.gen.max,pcie.link.width.current --format=csv"
                        ],
                        advice="a slow link with the full width points at the host (a PCIe switch shared by several GPUs, "
                        "IOMMU, a NUMA-remote slot): choose another machine",
                    ),
                    subject=f"GPU {gpu.index}",
                )
            )
    if findings or not measured:
        return findings
    return [passed(cid, f"pinned host-device copies {_span(measured, 1)} GB/s per GPU (slower direction)")]


# ---------------------------------------------------------------- gpu.perf-interconnect


def check_perf_interconnect(facts: Facts, checks: CheckOptions, ctx: Context) -> list[Finding]:
    cid = "gpu.perf-interconnect"
    perf = _perf(facts)
    if perf is None or len(perf.gpus) < 2:
        return []
    if perf.interconnect_gbps is None:
        return [skipped(cid, f"GPU-to-GPU bandwidth not measured: {perf.interconnect_error or 'no method worked'}")]
    data = load_performance_data()
    model = data.model_of(perf.gpus[0].name)
    nccl = perf.interconnect_method == "nccl-allreduce"
    what = "NCCL all-reduce bus bandwidth" if nccl else "peer-to-peer copy bandwidth"
    expected: float | None
    if model is not None and model.nvlink_gbps:
        expected, path = model.nvlink_gbps * data.nvlink_achievable, f"{model.model} NVLink"
    else:
        link = _link(_health_by_index(facts), perf.gpus[0], model)
        pcie = data.pcie_gbps(*link) if link else None
        expected = pcie * data.pcie.p2p_achievable if pcie else None
        path = f"PCIe gen{link[0]} x{link[1]}" if link else "PCIe"
    measured = perf.interconnect_gbps
    if expected and measured < INTERCONNECT_SHARE * expected:
        advice = (
            "on an NVLink board this means NVLink links are down or traffic goes over PCIe "
            "(`nvidia-smi nvlink -s`, `nvidia-smi topo -m`); choose another machine"
        )
        return [
            warn(
                cid,
                f"{what} {measured:.1f} GB/s across {len(perf.gpus)} GPUs, {measured / expected:.0%} of the "
                f"~{expected:.0f} GB/s {path} should carry",
                Fix(commands=["nvidia-smi topo -m"], advice=advice),
            )
        ]
    reference = f" (~{expected:.0f} expected over {path})" if expected else ""
    return [passed(cid, f"{what} {measured:.1f} GB/s across {len(perf.gpus)} GPUs{reference}")]


# ---------------------------------------------------------------- the fleet


def _figures(perf: PerfFacts) -> dict[str, float]:
    """Each perf check's one figure for a pod: its GPUs' median matmul, its slowest copy, its interconnect."""
    figures = {}
    tflops = [g.matmul_tflops for g in perf.gpus if g.matmul_tflops is not None]
    copies = [min(g.h2d_gbps, g.d2h_gbps) for g in perf.gpus if g.h2d_gbps is not None and g.d2h_gbps is not None]
    if tflops:
        figures["gpu.perf-compute"] = statistics.median(tflops)
    if copies:
        figures["gpu.perf-pcie"] = min(copies)
    if perf.interconnect_gbps is not None:
        figures["gpu.perf-interconnect"] = perf.interconnect_gbps
    return figures


_UNITS = {"gpu.perf-compute": "TFLOPS", "gpu.perf-pcie": "GB/s", "gpu.perf-interconnect": "GB/s"}


def beside_fleet_median(hosts: list[HostReport]) -> list[HostReport]:
    """Each pod's perf findings with its figure beside the median of the fleet's pods with the
    same GPU model (an RTX 4090 is not slow next to an H100), so the slow pod stands out."""
    measured = {
        h.name: perf
        for h in hosts
        if h.status is HostStatus.OK and h.facts is not None and (perf := _perf(h.facts)) is not None and perf.gpus
    }
    by_model: dict[str | None, list[str]] = {}
    for name, perf in measured.items():
        by_model.setdefault(perf.gpus[0].name, []).append(name)
    # Once per pod, not once per pod and peer: a fleet of N pods was N^2 medians.
    figures_of = {name: _figures(perf) for name, perf in measured.items()}
    out = []
    for host in hosts:
        perf = measured.get(host.name)
        peers = by_model.get(perf.gpus[0].name, []) if perf is not None else []
        if perf is None or len(peers) < 2:
            out.append(host)
            continue
        mine = figures_of[host.name]
        figures = [figures_of[name] for name in peers]
        findings = []
        for f in host.findings:
            values = [each[f.check] for each in figures if f.check in each]
            if f.check in mine and len(values) >= 2:
                median = statistics.median(values)
                f = f.model_copy(
                    update={
                        "message": f"{f.message}; this pod {mine[f.check]:.1f} {_UNITS[f.check]}, "
                        f"median of {len(values)} pods with {perf.gpus[0].name} "
                        f"{median:.1f}"
                    }
                )
            findings.append(f)
        out.append(host.model_copy(update={"findings": findings}))
    return out


@dataclass(frozen=True)
class ModelFigures:
    """One perf check's figure for each measured pod with one GPU model, and their median:
    what beside_fleet_median sets a pod beside, for a chart."""

    model: str
    check: str
    unit: str
    pods: dict[str, float]

    @property
    def median(self) -> float:
        return statistics.median(self.pods.values())


def fleet_figures(hosts: list[HostReport]) -> list[ModelFigures]:
    """Per GPU model (in the order first met) and perf check, each measured pod's figure."""
    table: dict[tuple[str, str], dict[str, float]] = {}
    for host in hosts:
        perf = _perf(host.facts) if host.status is HostStatus.OK and host.facts is not None else None
        if perf is None or not perf.gpus:
            continue
        model = perf.gpus[0].name or "unknown GPU"
        for check, figure in _figures(perf).items():
            table.setdefault((model, check), {})[host.name] = figure
    return [ModelFigures(model, check, _UNITS[check], pods) for (model, check), pods in table.items()]


def saved_fleet_figures(hosts: list[HostReport]) -> list[ModelFigures]:
    """fleet_figures, medians included, for the views of a saved report (the hosts ledger, the
    HTML chart): a pod whose saved facts break them is left out of the figures, never the view."""

    def figures(some: list[HostReport]) -> list[ModelFigures]:
        found = fleet_figures(some)
        for figure in found:
            figure.median  # noqa: B018  # computed here, inside the guard
        return found

    none: list[ModelFigures] = []
    return run_fleet_step("perf figures", hosts, figures, none).result


RULES = [check_perf_compute, check_perf_pcie, check_perf_interconnect]
