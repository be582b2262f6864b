"""`fleet check --perf` end to end on real sshd pods: the canary in each pod's (fake) torch,
each pod beside the fleet median, a busy pod left alone, all within the per-pod budget."""

from __future__ import annotations

import time

import pytest
from fleet_helpers import HEALTHY, host_entry, write_inventory
from sshfleet import PodSpec

pytestmark = pytest.mark.sshd

H100 = {"tflops": 745.0, "h2d_gbps": 53.2, "d2h_gbps": 51.8, "allreduce_busbw_gbps": 468.0, "p2p_gbps": 41.0}


@pytest.fixture(scope="module")
def perf_pods(ssh_fleet):
    return ssh_fleet.start(
        [
            PodSpec("perf-fast-a", **{**HEALTHY, "nvidia_smi": "h100x8"}, canary=H100),
            PodSpec("perf-fast-b", **{**HEALTHY, "nvidia_smi": "h100x8"}, canary={**H100, "tflops": 738.0}),
            PodSpec(
                "perf-slow",
                **{**HEALTHY, "nvidia_smi": "h100x8"},
                canary={**H100, "tflops": 402.0, "allreduce_busbw_gbps": None, "p2p_gbps": 22.0},
            ),
            PodSpec("perf-busy", **{**HEALTHY, "nvidia_smi": "h100x1-busy"}, canary=H100),
        ]
    )


def _perf(host, check):
    return [f for f in host.findings if f.check == check]


def test_perf_canary_across_the_fleet(ssh_fleet, perf_pods, run_cli, tmp_path):
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(p) for p in perf_pods], trusted=perf_pods
    )
    started = time.monotonic()
    result = run_cli("fleet", "check", "-i", str(inventory), "--perf", "--format", "json")
    elapsed = time.monotonic() - started
    report = result.report
    assert all(h.status.value == "ok" for h in report.hosts)
    fast = result.host("perf-fast-a")
    assert fast.facts.perf.ran and len(fast.facts.perf.gpus) == 8
    assert fast.facts.perf.duration_s < 20
    [compute] = _perf(fast, "gpu.perf-compute")
    assert compute.severity.value == "pass" and compute.message.endswith(
        "this pod 745.0 TFLOPS, median of 3 pods with NVIDIA H100 80GB HBM3 738.0"
    )
    slow = result.host("perf-slow")
    compute = _perf(slow, "gpu.perf-compute")
    assert len(compute) == 8 and {f.severity.value for f in compute} == {"warn"}
    assert compute[0].message.endswith("this pod 402.0 TFLOPS, median of 3 pods with NVIDIA H100 80GB HBM3 738.0")
    [interconnect] = _perf(slow, "gpu.perf-interconnect")
    assert interconnect.severity.value == "warn" and "peer-to-peer copy bandwidth 22.0 GB/s" in interconnect.message
    busy = result.host("perf-busy")
    assert busy.facts.perf.ran is False and busy.facts.perf.gpus == []
    [note] = _perf(busy, "gpu.perf-compute")
    assert note.severity.value == "skip" and "GPU 0 holds 71893 MiB" in note.message
    assert elapsed < 4 * 20, elapsed


def test_only_accepts_perf_checks_without_perf(ssh_fleet, perf_pods, run_cli, tmp_path):
    pod = perf_pods[0]
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])
    result = run_cli("fleet", "check", "-i", str(inventory), "--only", "gpu.perf-compute", "--format", "json")
    host = result.host(pod.name)
    assert result.code == 0 and host.facts.perf is None and host.findings == []
