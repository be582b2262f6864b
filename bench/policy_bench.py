"""Policy benchmark: what a computefence.yaml with 20 requirements and 3 custom checks adds to
`computefence fleet check` on N real sshd pods (default 100), against the same check with
--no-policy. Target: under 10% more wall time.

The two variants run alternately, each as its own process (fleet_bench.measure: wall, CPU of
the tool and its children, peak memory), after one untimed warm-up of each; medians are
reported. Every run must bring back an answer from every pod, and every policy run must
show the custom checks' results, or it is marked invalid.

Needs root (the pods are real sshd in namespaces; see tests/sshfleet.py). Results go to
bench/results/policy-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_bench import PROBE_LIMIT_S, REPO, Fleet, measure, pods_unavailable, save_results

# 20 requirements: the five machine-level ones and 15 packages (the fixed list plus four more).
POLICY = """\
requirements:
  python: ">=3.8"
  torch: ">=2.0"
  torch-cuda: ">=12.1"
  nvidia-driver: ">=525"
  glibc: ">=2.28"
  transformers: "*"
  accelerate: "*"
  peft: "*"
  trl: "*"
  datasets: "*"
  deepspeed: "*"
  flash-attn: "*"
  bitsandbytes: "*"
  xformers: "*"
  vllm: "*"
  numpy: ">=1.20"
  safetensors: "*"
  tokenizers: "*"
  sentencepiece: "*"
  wandb: "*"
custom:
  - {id: workspace, run: "test -d / && df -P / >/dev/null"}
  - {id: python-runs, run: "python3 -c 'import sys; print(sys.version)'", expect: {stdout_matches: "^3\\\\."}}
  - {id: kernel, run: "uname -r"}
"""


def run_check(fleet: Fleet, run_dir: Path, policy: Path | None, args: argparse.Namespace) -> dict:
    run_dir.mkdir(parents=True)
    report = run_dir / "report.json"
    chosen = ["--policy", str(policy)] if policy else ["--no-policy"]
    argv = [
        *args.computefence.split(),
        "fleet",
        "check",
        "-i",
        str(fleet.inventory),
        "--format",
        "json",
        "-o",
        str(report),
        "--timeout",
        str(PROBE_LIMIT_S + 20),
        *chosen,
    ]
    result = measure(argv, env={**os.environ, "HOME": str(run_dir)})
    try:
        hosts = json.loads(report.read_text())["hosts"]
    except (OSError, ValueError):
        hosts = []
    ok = [h for h in hosts if h["status"] == "ok"]
    custom = [(h["name"], f) for h in ok for f in h["findings"] if f["check"].startswith("custom.")]
    result["ok"] = len(ok)
    result["custom_passed"] = sum(1 for _, f in custom if f["severity"] == "pass")
    # Why a custom check did not pass (a timeout on an overloaded machine, ...), a few examples.
    result["custom_failures"] = [
        f"{name}: {f['check']}: {f['message']}" for name, f in custom if f["severity"] != "pass"
    ][:5]
    result["valid"] = len(ok) == fleet.n and (policy is None or result["custom_passed"] == 3 * fleet.n)
    return result


def compare(runs: dict[str, list[dict]], figures: tuple[str, ...]) -> dict:
    """Medians per variant and the policy's overhead in % for each figure ("wall_s", "cpu_s",
    "machine_cpu_s": every CPU second of the machine, the pods' sshd and probes included)."""
    summary: dict = {name: {"walls_s": [r["wall_s"] for r in results]} for name, results in runs.items()}
    for figure in figures:
        for name, results in runs.items():
            summary[name][f"{figure}_median"] = round(statistics.median(r[figure] for r in results), 3)
        base, policy = summary["no-policy"][f"{figure}_median"], summary["policy"][f"{figure}_median"]
        summary[figure.removesuffix("_s") + "_overhead_pct"] = round(100 * (policy / base - 1), 1)
    return summary


def headline(title: str, summary: dict) -> str:
    parts = [
        f"{title}: no policy {summary['no-policy']['wall_s_median']:.2f} s, "
        f"20 requirements + 3 custom checks {summary['policy']['wall_s_median']:.2f} s"
    ]
    names = {"wall": "wall", "cpu": "CPU of the tool", "machine_cpu": "machine CPU with the pods"}
    overheads = [
        f"{summary[k + '_overhead_pct']:+.1f}% {v}" for k, v in names.items() if k + "_overhead_pct" in summary
    ]
    return parts[0] + " (" + ", ".join(overheads) + "; target < 10% wall)"


def bench(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="cf-policy-bench-") as tmp:
        work = Path(tmp)
        policy = work / "computefence.yaml"
        policy.write_text(POLICY)
        print(f"== {args.pods} pods: starting ...", file=sys.stderr, flush=True)
        fleet = Fleet(args.pods, work)
        try:
            runs: dict[str, list[dict]] = {"no-policy": [], "policy": []}
            for round_ in range(args.repeat + 1):
                order = [("no-policy", None), ("policy", policy)]
                if round_ % 2:
                    order.reverse()
                for name, chosen in order:
                    result = run_check(fleet, work / "runs" / f"{name}-{round_}", chosen, args)
                    status = (
                        "ok"
                        if result["valid"]
                        else f"INVALID ({result['ok']}/{args.pods} ok, {result['custom_passed']} custom passes)"
                    )
                    print(
                        f"   {name:10s} {result['wall_s']:7.2f}s  cpu {result['cpu_s']:6.2f}s  "
                        f"{'(warm-up) ' if round_ == 0 else ''}{status}",
                        file=sys.stderr,
                        flush=True,
                    )
                    if round_:  # the first round warms the page cache and the pods' python
                        runs[name].append(result)
        finally:
            fleet.close()
    summary = compare(runs, ("wall_s", "cpu_s", "machine_cpu_s"))
    for name, results in runs.items():
        summary[name]["valid"] = all(r["valid"] for r in results)
        summary[name]["custom_failures"] = [line for r in results for line in r.get("custom_failures", [])][:10]
    summary["pods"] = args.pods
    summary["loadavg_at_start"] = os.getloadavg()
    return summary


def probe_alone(args: argparse.Namespace) -> dict:
    """One pod's side on its own: the probe run here with and without the policy's
    parameters (what a real pod, with its own CPU, spends per check)."""
    from computefence.connectors.payload import probe_params
    from computefence.models import CheckOptions
    from computefence.policy import parse_policy_text
    from computefence.probe.assemble import probe_payload
    from computefence.run import probe_extra

    extra = probe_extra(parse_policy_text(POLICY, "computefence.yaml").for_target("pod", []))
    runs: dict[str, list[dict]] = {"no-policy": [], "policy": []}
    with tempfile.TemporaryDirectory(prefix="cf-policy-probe-") as tmp:
        scripts = {}
        for name, params in (("no-policy", {}), ("policy", extra)):
            scripts[name] = Path(tmp) / f"{name}.py"
            scripts[name].write_text(probe_payload(probe_params(CheckOptions(), "python3", deadline_s=60, **params)))
        for round_ in range(args.repeat + 1):
            for name in ("no-policy", "policy") if round_ % 2 == 0 else ("policy", "no-policy"):
                result = measure([sys.executable, str(scripts[name])])
                if round_:
                    runs[name].append(result)
    summary = compare(runs, ("wall_s", "cpu_s"))
    summary["loadavg_at_start"] = os.getloadavg()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per variant; the median is reported")
    parser.add_argument(
        "--computefence",
        default=f"{sys.executable} -m computefence",
        help="the command line that runs computefence (default: this python -m computefence)",
    )
    parser.add_argument("--results", default=str(REPO / "bench" / "results"))
    parser.add_argument(
        "--probe-only", action="store_true", help="time only the probe, here, with and without the policy's parameters"
    )
    args = parser.parse_args(argv)
    if args.probe_only:
        summary = probe_alone(args)
        print(headline("the probe alone", summary))
        save_results(summary, args.results, "policy-probe")
        return 0
    if pods_unavailable("policy_bench"):
        return 2
    summary = bench(args)
    print(headline(f"{args.pods} pods", summary))
    save_results(summary, args.results, "policy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
