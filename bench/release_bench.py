"""`computefence fleet release --yes` on a fleet of condemned pods, beside the bare loop of the
same provider calls a user would script instead.

The provider APIs are the test suite's fake (tests/providers/fake_api.py) on loopback, with
--latency-ms added to every answer (a provider API across a WAN); RunPod goes through the real
runpod SDK both ways. The fleet: --runpod RunPod pods, --vast Vast.ai instances and --lambda
Lambda Cloud instances, each blocked by gpu.ecc in a fresh report. Measured, as the median of
--runs runs (fresh pods each time), both in this process with imports warm: wall seconds
(computefence: `fleet release --from REPORT --yes --action terminate`, its listing before
and after included; the bare loop: runpod.terminate_pod per pod, one DELETE per Vast instance,
one Lambda terminate for all its instances), CPU seconds of the process (the fake's server
threads included, alike for both), and the requests each sent.

    python3 bench/release_bench.py --runpod 8 --vast 8 --lambda 4 --latency-ms 150
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "providers")]

import httpx  # noqa: E402
from fake_api import FakeProviderApi, lambda_instance, runpod_pod, vast_instance  # noqa: E402

from computefence.cli import main as main_cli  # noqa: E402
from computefence.models import Finding, HostReport, HostStatus, Remedy, Report, Severity  # noqa: E402

ECC = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="uncorrectable ECC errors", remedy=Remedy.REPLACE)


def _stock(api: FakeProviderApi, n_runpod: int, n_vast: int, n_lambda: int) -> None:
    api.runpod_pods = [runpod_pod(f"rp{i:03d}", f"rp-{i}", ssh=("203.0.113.10", 22000 + i)) for i in range(n_runpod)]
    api.vast_instances = [
        vast_instance(5000 + i, f"vast-{i}", direct=("198.51.100.20", 41000 + i)) for i in range(n_vast)
    ]
    api.lambda_instances = [lambda_instance(f"{i:032x}", f"lambda-{i}", ip=f"192.0.2.{i + 1}") for i in range(n_lambda)]


def _report(env: dict[str, str]) -> Report:
    """The pods as discovery lists them, each blocked by gpu.ecc."""
    os.environ.update(env)
    from computefence.sources.lambda_cloud import LambdaSource
    from computefence.sources.runpod import RunPodSource
    from computefence.sources.vast import VastSource

    hosts = [
        HostReport(name=t.name, status=HostStatus.OK, host=t.host, port=t.port, provider=t.provider, findings=[ECC])
        for source in (RunPodSource(), VastSource(), LambdaSource())
        for t in source.targets()
    ]
    return Report(
        tool_version="bench", generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), hosts=hosts
    )


def _computefence(report_path: Path, env: dict[str, str]) -> float:
    """`fleet release` in this process (imports already warm, as for the bare loop)."""
    os.environ.update(env)
    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main_cli(
            ["fleet", "release", "--from", str(report_path), "--yes", "--action", "terminate", "--format", "json"]
        )
    wall = time.perf_counter() - started
    outcomes = [p["outcome"] for p in json.loads(out.getvalue())["pods"]]
    if code != 0 or set(outcomes) != {"released"}:
        raise SystemExit(f"computefence run failed ({code}): {outcomes}")
    return wall


def _bare(api: FakeProviderApi, env: dict[str, str]) -> float:
    import runpod

    started = time.perf_counter()
    os.environ.update(env)
    runpod.api_key = env["RUNPOD_API_KEY"]
    for pod in list(api.runpod_pods):
        runpod.terminate_pod(pod["id"])
    with httpx.Client(headers={"Authorization": f"Bearer {env['VAST_API_KEY']}"}) as client:
        for inst in list(api.vast_instances):
            client.delete(f"{env['VAST_URL']}/api/v0/instances/{inst['id']}/").raise_for_status()
    ids = [i["id"] for i in api.lambda_instances]
    if ids:
        httpx.post(
            f"{env['LAMBDA_API_URL']}/api/v1/instance-operations/terminate",
            json={"instance_ids": ids},
            headers={"Authorization": f"Bearer {env['LAMBDA_API_KEY']}"},
        ).raise_for_status()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runpod", type=int, default=8)
    parser.add_argument("--vast", type=int, default=8)
    parser.add_argument("--lambda", dest="n_lambda", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float, int]]] = {"computefence": [], "bare loop": []}
    with FakeProviderApi() as api, tempfile.TemporaryDirectory() as tmp:
        env = {
            "RUNPOD_API_BASE_URL": api.base_url("runpod"),
            "VAST_URL": api.base_url("vast"),
            "LAMBDA_API_URL": api.base_url("lambda"),
            "RUNPOD_API_KEY": api.keys["runpod"],
            "VAST_API_KEY": api.keys["vast"],
            "LAMBDA_API_KEY": api.keys["lambda"],
        }
        for _ in range(args.runs):
            for tool in rows:
                _stock(api, args.runpod, args.vast, args.n_lambda)
                api.latency_s = 0.0
                report = Path(tmp) / "report.json"
                report.write_text(_report(env).model_dump_json())
                api.requests.clear()
                api.latency_s = args.latency_ms / 1000
                cpu = time.process_time()
                wall = _computefence(report, env) if tool == "computefence" else _bare(api, env)
                rows[tool].append((wall, time.process_time() - cpu, len(api.requests)))
    pods = args.runpod + args.vast + args.n_lambda
    print(
        f"{pods} pods ({args.runpod} RunPod, {args.vast} Vast.ai, {args.n_lambda} Lambda), "
        f"{args.latency_ms:g} ms per request, median of {args.runs} runs, load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'tool':<14}{'wall s':>8}{'CPU s':>8}{'requests':>10}")
    for tool, runs in rows.items():
        wall, cpu, n = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"{tool:<14}{wall:>8.2f}{cpu:>8.2f}{n:>10.0f}")


if __name__ == "__main__":
    main()
