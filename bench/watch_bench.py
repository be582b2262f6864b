"""Watch benchmark: `fleet watch --once` against `fleet check` on the same real sshd pods.

    watch   `computefence fleet watch --once -i inventory.yaml --format json -o report.json`
    check   `computefence fleet check -i inventory.yaml --format json -o report.json`

Every pod runs a fake training job (tests/fleet/fake_trainer.py, started as `torchrun ...
train.py`, a few steps a second, a small checkpoint every 20 s) beside the fake nvidia-smi
and torch, so the watch probe has processes, a log, checkpoints and a trainer_state.json to
read and fleet check has its full probe to run. With --real-torch the pods hold this run's
real torch (2.13, CPU) instead of the fake one, so the check's probe imports a real torch, as
on a real pod. The two commands alternate, after one
untimed run of each; each run is timed from spawn to exit with its own and its children's CPU
(wait4: the client's CPU), and the CPU the pods' sshd trees used meanwhile (the pods' side).
A run counts only if every pod answered. probe_s is the median of the pods' own probe
durations (facts.probe_duration_s): for the watch, its GPU sampling window is the floor.

Needs root (tests/sshfleet.py). Results go to bench/results/watch-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests"), str(REPO / "tests" / "fleet")]

from fleet_bench import _machine_busy_s, measure  # noqa: E402

FIGURES = ("wall_s", "cpu_s", "pod_cpu_s", "machine_cpu_s", "maxrss_mib", "probe_s")
COMMANDS = {
    "watch": ["fleet", "watch", "--once", "--timeout", "60"],
    "check": ["fleet", "check", "--timeout", "140"],
}
# The job on every pod: slow enough that a hundred of them leave the two cores to the run.
TRAINER_ARGS = ["--output_dir", "/workspace/out", "--steps_per_second", "5", "--save_steps", "100"]
TRAINER_ARGS += ["--logging_steps", "5", "--checkpoint_bytes", "65536", "--max_steps", "100000"]


def _pods_cpu_s(pods) -> float:
    import os

    total = 0
    for pod in pods:
        try:
            fields = Path(f"/proc/{pod.sshd_pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, TypeError):
            continue
        total += sum(int(v) for v in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def _one(command: str, inventory: Path, run_dir: Path, pods) -> dict:
    run_dir.mkdir(parents=True)
    report = run_dir / "report.json"
    argv = [sys.executable, "-m", "computefence", *COMMANDS[command], "-i", str(inventory)]
    argv += ["--format", "json", "-o", str(report)]
    env = {"HOME": str(run_dir), "PYTHONPATH": str(REPO), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    before = _pods_cpu_s(pods)
    result = measure(argv, env=env, timeout=300)
    result["pod_cpu_s"] = round(_pods_cpu_s(pods) - before, 2)
    try:
        hosts = json.loads(report.read_text())["hosts"]
    except (OSError, ValueError, KeyError):
        hosts = []
    result["ok"] = sum(1 for h in hosts if h["status"] == "ok")
    durations = [h["facts"]["probe_duration_s"] for h in hosts if h.get("facts")]
    result["probe_s"] = round(statistics.median(durations), 2) if durations else None
    result["valid"] = result["ok"] == len(pods) and result["returncode"] in (0, 1)
    return result


def bench(n: int, repeat: int, real_torch: bool = False) -> dict:
    from fleet_helpers import HEALTHY, host_entry, write_inventory
    from sshfleet import PodSpec, SshFleet
    from trainer_pods import FILES, start_trainer, wait_for

    with tempfile.TemporaryDirectory(prefix=f"cf-watch-bench-{n}-") as tmp:
        work = Path(tmp)
        fleet = SshFleet(work / "pods")
        try:
            started = time.perf_counter()
            spec = dict(HEALTHY, torch=None, real_torch=True) if real_torch else HEALTHY
            pods = fleet.start([PodSpec(f"pod-{i:03d}", files=dict(FILES), **spec) for i in range(n)])
            print(f"== {n} pods up in {time.perf_counter() - started:.1f}s; starting jobs", file=sys.stderr)
            for pod in pods:
                start_trainer(pod, TRAINER_ARGS)
            for pod in pods:
                wait_for(pod, "/workspace/train.log", timeout=120)
            inventory = write_inventory(
                work / "inventory.yaml",
                fleet,
                [host_entry(pod) for pod in pods],
                trusted=pods,
                checks={"output_dir": "/workspace/out"},
            )
            for command in COMMANDS:
                _one(command, inventory, work / "runs" / f"warm-{command}", pods)
            runs: dict[str, list[dict]] = {command: [] for command in COMMANDS}
            for round_ in range(repeat):
                order = list(COMMANDS) if round_ % 2 == 0 else list(reversed(COMMANDS))
                for command in order:
                    result = _one(command, inventory, work / "runs" / f"{command}-{round_}", pods)
                    runs[command].append(result)
                    state = "ok" if result["valid"] else f"INVALID ({result['ok']}/{n} ok)"
                    print(
                        f"   {command:6s} {result['wall_s']:7.2f}s wall {result['cpu_s']:6.2f} CPU-s "
                        f"(pods {result['pod_cpu_s']:6.2f}) {state}",
                        file=sys.stderr,
                    )
        finally:
            fleet.stop_all()
    return {command: _summary(results) for command, results in runs.items()}


def _summary(runs: list[dict]) -> dict:
    valid = [r for r in runs if r["valid"]]
    out: dict = {"runs": runs, "valid_runs": len(valid)}
    for key in FIGURES:
        values = [r[key] for r in valid if r.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
            out[key + "_min"] = min(values)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; medians are reported")
    parser.add_argument("--results", default=str(REPO / "bench" / "results"))
    parser.add_argument("--real-torch", action="store_true", help="the pods hold this run's real torch")
    args = parser.parse_args(argv)
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    busy_before = _machine_busy_s()
    results = {"pods": args.pods, "repeat": args.repeat, "real_torch": args.real_torch, "loadavg_before": load_before}
    results["commands"] = bench(args.pods, args.repeat, args.real_torch)
    results["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    results["machine_busy_s"] = round(_machine_busy_s() - busy_before, 1)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"watch-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{'':8s}{'wall s':>10s}{'client CPU-s':>14s}{'pods CPU-s':>12s}{'probe s':>9s}{'valid':>7s}")
    for command, summary in results["commands"].items():
        print(
            f"{command:8s}{summary.get('wall_s', float('nan')):10.2f}{summary.get('cpu_s', float('nan')):14.2f}"
            f"{summary.get('pod_cpu_s', float('nan')):12.2f}{summary.get('probe_s', float('nan')):9.2f}"
            f"{summary['valid_runs']:>4d}/{args.repeat}"
        )
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
