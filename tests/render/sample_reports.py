"""Hand-built reports for the renderer tests: renderers only present, so the summary
here is filled in by hand, as the evaluator would. Fixtures in conftest.py."""

from __future__ import annotations

from computefence.models import (
    DriftRow,
    Facts,
    Finding,
    Fix,
    FixStep,
    GpuDevice,
    GpuFacts,
    GpuPerf,
    HostReport,
    HostStatus,
    IdentityFacts,
    PerfFacts,
    ProviderInfo,
    Remedy,
    Report,
    Severity,
    SourceStatus,
    Summary,
    TorchFacts,
)

OUTPUT_DIR_MSG = (
    "--output-dir ./out resolves to /root/out on the container's overlay root; it is lost when the pod stops"
)
OUTPUT_DIR_FIX = "mkdir -p /workspace/out && ln -sfn /workspace/out /root/out"
HF_MSG = "HF cache defaults to /root/.cache/huggingface/hub on the overlay root"
HF_COMMANDS = ["echo 'export HF_HOME=/workspace/hf' >> ~/.bashrc", "export HF_HOME=/workspace/hf"]
HF_ADVICE = "also set HF_HOME in the pod's Environment Variables so it comes back after a restart"
HF_FIX = Fix(steps=[FixStep.safe(c) for c in HF_COMMANDS], advice=HF_ADVICE)
SKIP_MSG = "no NVIDIA GPU on this machine; GPU checks skipped"


def _facts(gpus: int = 1, torch: str = "2.4.1+cu124", cuda: str | None = "12.4") -> Facts:
    return Facts(
        identity=IdentityFacts(hostname="h", kernel="6.5.0", cpu_count=16, mem_total_bytes=128_000_000_000),
        gpu=GpuFacts(
            nvidia_smi_found=True,
            exit_code=0,
            driver_version="550.54.15",
            cuda_version="12.4",
            gpus=[GpuDevice(index=i, name="NVIDIA H100 80GB HBM3", compute_cap="9.0") for i in range(gpus)],
        ),
        torch=TorchFacts(python_found=True, importable=True, version=torch, cuda_build=cuda, cuda_available=bool(cuda)),
    )


def _pass(check: str, message: str = "ok") -> Finding:
    return Finding(check=check, severity=Severity.PASS, message=message)


def _runpod(pod_id: str, cost: float) -> ProviderInfo:
    return ProviderInfo(provider="runpod", pod_id=pod_id, cost_per_hour=cost, gpu_type="H100", gpu_count=1)


def doctor_report() -> Report:
    host = HostReport(
        name="laptop",
        status=HostStatus.OK,
        facts=_facts(gpus=0, torch="2.13.0+cpu", cuda=None),
        findings=[
            Finding(
                check="storage.output-dir",
                severity=Severity.BLOCK,
                message=OUTPUT_DIR_MSG,
                fix=Fix(steps=[FixStep.safe(OUTPUT_DIR_FIX)]),
                subject="/root/out",
            ),
            Finding(
                check="storage.hf-cache",
                severity=Severity.WARN,
                message=HF_MSG,
                fix=HF_FIX,
                subject="/root/.cache/huggingface/hub",
            ),
            _pass("storage.no-volume", "a persistent volume is mounted at /workspace"),
            _pass("storage.disk-headroom", "412 GB free on /workspace"),
            Finding(check="gpu.driver", severity=Severity.SKIP, message=SKIP_MSG),
            _pass("system.shm", "/dev/shm has 64 GB"),
        ],
    )
    return Report(
        tool_version="0.1.0",
        kind="doctor",
        generated_at="2025-06-01T12:00:00+00:00",
        hosts=[host],
        summary=Summary(
            hosts=1, ok=1, hosts_blocked=1, blockers=1, warnings=1, passed=3, skipped=1, verdict=Severity.BLOCK
        ),
    )


def fleet_report() -> Report:
    output_dir = Finding(
        check="storage.output-dir",
        severity=Severity.BLOCK,
        message=OUTPUT_DIR_MSG,
        fix=Fix(steps=[FixStep.safe(OUTPUT_DIR_FIX)]),
        subject="/root/out",
        remedy=Remedy.CONFIG,
    )
    hosts = [
        HostReport(
            name="pod-a",
            status=HostStatus.OK,
            host="203.0.113.10",
            port=22022,
            provider=_runpod("a1", 2.49),
            duration_s=3.2,
            facts=_facts(),
            findings=[
                output_dir,
                Finding(check="storage.hf-cache", severity=Severity.WARN, message=HF_MSG, fix=HF_FIX),
                _pass("gpu.driver"),
            ],
        ),
        HostReport(
            name="pod-b",
            status=HostStatus.OK,
            provider=_runpod("b2", 2.49),
            facts=_facts(),
            findings=[output_dir, _pass("gpu.driver")],
        ),
        HostReport(
            name="pod-c",
            status=HostStatus.OK,
            provider=_runpod("c3", 2.49),
            facts=_facts(torch="2.5.1+cpu", cuda=None),
            findings=[
                Finding(
                    check="gpu.torch-cpu-build",
                    severity=Severity.BLOCK,
                    message="torch 2.5.1+cpu is a CPU-only build on a pod with 1 GPU",
                    fix="pip install --force-reinstall torch==2.5.1 --index-url https://download.pytorch.org/whl/cu124",
                ),
                _pass("gpu.driver"),
            ],
        ),
        HostReport(
            name="pod-d",
            status=HostStatus.UNREACHABLE,
            host="203.0.113.13",
            port=22,
            reason="connection refused on 203.0.113.13:22",
            fix="ssh -p 22 root@203.0.113.13 true",
        ),
        HostReport(
            name="pod-e",
            status=HostStatus.OK,
            facts=_facts(gpus=8),
            findings=[_pass("gpu.driver"), _pass("storage.output-dir")],
        ),
    ]
    return Report(
        tool_version="0.1.0",
        kind="fleet",
        generated_at="2025-06-01T12:00:00+00:00",
        hosts=hosts,
        sources=[
            SourceStatus(name="inventory/pods.yaml", targets=5),
            SourceStatus(name="vast", ok=False, error="HTTP 401 from the Vast.ai API"),
        ],
        drift=[
            DriftRow(component="torch", values={"2.4.1+cu124": ["pod-a", "pod-b", "pod-e"], "2.5.1+cpu": ["pod-c"]})
        ],
        summary=Summary(
            hosts=5,
            ok=4,
            not_ok=1,
            hosts_blocked=3,
            hosts_warned=0,
            hosts_clean=1,
            blockers=3,
            warnings=1,
            passed=5,
            cost_per_hour_total=7.47,
            cost_per_hour_at_risk=7.47,
            hosts_at_risk_priced=3,
            verdict=Severity.BLOCK,
        ),
    )


# Strings a hostile or broken pod could report: rich markup, ANSI escapes, HTML, Markdown
# table and fence breakers, XML specials, Prometheus label breakers.
HOSTILE_NAME = 'evil[bold red]X[/]\x1b[2J<script>|"q"\\'
HOSTILE_MESSAGE = "path </details>```\n| x | y |\n]]> & \x07\x1b]0;pwned\x07 [link](http://x) *bold*"
HOSTILE_FIX = "echo ```; rm -rf / # [red]nope[/red] <b>"


def hostile_report() -> Report:
    host = HostReport(
        name=HOSTILE_NAME,
        status=HostStatus.OK,
        provider=ProviderInfo(provider="runpod", pod_id='id"\n', cost_per_hour=1.5),
        facts=_facts(),
        findings=[
            Finding(
                check="storage.output-dir",
                severity=Severity.BLOCK,
                message=HOSTILE_MESSAGE,
                fix=Fix(steps=[FixStep.safe(HOSTILE_FIX)]),
                subject=HOSTILE_NAME,
            ),
            Finding(
                check="storage.hf-cache",
                severity=Severity.WARN,
                message=HOSTILE_MESSAGE,
                fix=Fix(steps=[FixStep.safe(HOSTILE_FIX)]),
            ),
        ],
    )
    down = HostReport(
        name="down|<i>",
        status=HostStatus.PROBE_FAILED,
        reason=HOSTILE_MESSAGE,
        fix=Fix(steps=[FixStep.safe(HOSTILE_FIX)]),
    )
    return Report(
        tool_version="0.1.0",
        kind="fleet",
        generated_at="2025-06-01T12:00:00+00:00",
        hosts=[host, down],
        drift=[DriftRow(component="torch", values={HOSTILE_NAME: [HOSTILE_NAME], "2.4.1": ["down|<i>"]})],
        summary=Summary(hosts=2, ok=1, not_ok=1, hosts_blocked=1, blockers=1, warnings=1, verdict=Severity.BLOCK),
    )


# Names that would be markup if pasted into HTML: the page must show them as text.
SCRIPT_NAME = '<script>alert("pwned")</script>'
IMG_NAME = '"><img src=x onerror=alert(1)>'
# A fix command with every HTML special, quotes and a shell quote: shown exactly as pasted.
PASTE_FIX = "printf '%s\\n' \"<b>&amp;</b>\" 'it'\"'\"'s' | grep -- '-x' > /workspace/out && echo \"$HOME\""


def html_hostile_report() -> Report:
    def pod(name: str, tag: str) -> HostReport:
        return HostReport(
            name=name,
            status=HostStatus.OK,
            tags=[tag],
            provider=ProviderInfo(
                provider="runpod", pod_id=name, gpu_type=IMG_NAME, gpu_count=1, cost_per_hour=1.5, image=SCRIPT_NAME
            ),
            facts=_facts(torch=SCRIPT_NAME),
            findings=[
                Finding(
                    check="storage.output-dir",
                    severity=Severity.BLOCK,
                    message=f"{name} writes to {IMG_NAME}",
                    fix=Fix(commands=[PASTE_FIX], advice=SCRIPT_NAME),
                    subject=name,
                ),
                _pass("gpu.driver", IMG_NAME),
            ],
        )

    hosts = [pod(SCRIPT_NAME, IMG_NAME), pod(IMG_NAME, SCRIPT_NAME)]
    return Report(
        tool_version="0.1.0",
        kind="fleet",
        generated_at="2025-06-01T12:00:00+00:00",
        hosts=hosts,
        sources=[SourceStatus(name=SCRIPT_NAME, ok=False, error=IMG_NAME)],
        drift=[DriftRow(component=SCRIPT_NAME, values={IMG_NAME: [SCRIPT_NAME], "2.4.1": [IMG_NAME]})],
        summary=Summary(hosts=2, ok=2, hosts_blocked=2, blockers=2, passed=2, verdict=Severity.BLOCK),
    )


def _perf_pod(name: str, model: str, tflops: float, copy: float, severity: Severity, median: float) -> HostReport:
    facts = _facts()
    facts.perf = PerfFacts(
        ran=True,
        gpus=[GpuPerf(index=0, name=model, dtype="bfloat16", matmul_tflops=tflops, h2d_gbps=copy, d2h_gbps=copy + 1)],
    )
    return HostReport(
        name=name,
        status=HostStatus.OK,
        facts=facts,
        findings=[
            Finding(
                check="gpu.perf-compute",
                severity=severity,
                message=f"bf16 matmul {tflops:.0f} TFLOPS per GPU; this pod {tflops:.1f} TFLOPS, median of 3 pods with {model} {median:.1f}",
            ),
            Finding(check="gpu.perf-pcie", severity=Severity.PASS, message=f"pinned copies {copy:.1f} GB/s"),
        ],
    )


def perf_report() -> Report:
    """`--perf` on three H100 pods (one slow) and two RTX 4090 pods."""
    h100, rtx = "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"
    hosts = [
        _perf_pod("h100-a", h100, 742.0, 52.1, Severity.PASS, 738.0),
        _perf_pod("h100-b", h100, 738.0, 51.8, Severity.PASS, 738.0),
        _perf_pod("h100-slow", h100, 402.0, 50.9, Severity.WARN, 738.0),
        _perf_pod("rtx-a", rtx, 148.0, 24.6, Severity.PASS, 146.0),
        _perf_pod("rtx-b", rtx, 144.0, 25.1, Severity.PASS, 146.0),
    ]
    return Report(
        tool_version="0.1.0",
        kind="fleet",
        generated_at="2025-06-01T12:00:00+00:00",
        hosts=hosts,
        summary=Summary(hosts=5, ok=5, hosts_warned=1, hosts_clean=4, warnings=1, passed=9, verdict=Severity.WARN),
    )
