"""Slurm benchmark: `computefence fleet check --slurm` against bare `srun` of the same probe.

    computefence   `computefence fleet check --slurm --no-policy -f json -o report.json -q`
    srun           one `srun --nodelist=NODE --nodes=1 --ntasks=1 --immediate=10 --gres=gpu:1
                   python3 -B -c BOOTSTRAP` per node, all at once, the probe on stdin (the
                   lower bound: what the connector runs, without reading, judging or writing)

on the same real Slurm 22.05 cluster on loopback (tests/slurmcluster.py: slurmctld, one
slurmd per node in its own namespaces, each with a recorded H100 driver). Each way runs as
its own process(es), timed from spawn to exit; every run must bring back a parsable probe
answer from every node or it is marked invalid. Needs root, slurm-wlm and munge.

    python3 bench/slurm_bench.py --nodes 8,32 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from slurmcluster import NodeSpec, SlurmCluster, slurm_unavailable_reason  # noqa: E402

from computefence.connectors.payload import parse_probe_output, probe_params  # noqa: E402
from computefence.models import CheckOptions  # noqa: E402
from computefence.probe.assemble import BOOTSTRAP, probe_wire  # noqa: E402


def run_computefence(cluster: SlurmCluster, workdir: Path) -> dict:
    out = workdir / "report.json"
    argv = [sys.executable, "-m", "computefence", "fleet", "check", "--slurm", "--no-policy", "-f", "json"]
    argv += ["-o", str(out), "-q"]
    env = dict(cluster.env, PYTHONPATH=str(REPO))
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, timeout=600)
    wall = time.monotonic() - started
    hosts = json.loads(out.read_text())["hosts"] if out.exists() else []
    ok = sum(1 for h in hosts if h["status"] == "ok")
    return {"wall_s": round(wall, 2), "answered": ok, "exit": done.returncode}


def run_srun(cluster: SlurmCluster) -> dict:
    payload = probe_wire(probe_params(CheckOptions()))
    answers: dict[str, bool] = {}

    def one(node: str) -> None:
        argv = ["srun", f"--nodelist={node}", "--nodes=1", "--ntasks=1", "--immediate=10", "--gres=gpu:1", "--quiet"]
        done = subprocess.run(
            [*argv, "python3", "-B", "-c", BOOTSTRAP], input=payload, env=cluster.env, capture_output=True, timeout=600
        )
        try:
            parse_probe_output(done.stdout)
            answers[node] = True
        except Exception:
            answers[node] = False

    started = time.monotonic()
    threads = [threading.Thread(target=one, args=(node,)) for node in cluster.nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    return {"wall_s": round(wall, 2), "answered": sum(answers.values()), "exit": 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="8,32", help="cluster sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    reason = slurm_unavailable_reason()
    if reason:
        print(f"slurm_bench: {reason}", file=sys.stderr)
        return 2
    results = []
    for size in [int(n) for n in args.nodes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="slurm-bench-") as tmp:
            cluster = SlurmCluster(Path(tmp), [NodeSpec(f"b{i}") for i in range(1, size + 1)])
            try:
                started = time.monotonic()
                cluster.start()
                up = time.monotonic() - started
                runs: dict[str, list[dict]] = {"computefence": [], "srun": []}
                for _ in range(args.runs):
                    runs["srun"].append(run_srun(cluster))
                    runs["computefence"].append(run_computefence(cluster, Path(tmp)))
            finally:
                cluster.stop()
        row = {"nodes": size, "cluster_up_s": round(up, 2)}
        for way, measured in runs.items():
            valid = [m["wall_s"] for m in measured if m["answered"] == size]
            row[way] = {
                "median_wall_s": round(statistics.median(valid), 2) if valid else None,
                "runs": measured,
                "invalid": len(measured) - len(valid),
            }
        results.append(row)
        cf, bare = row["computefence"]["median_wall_s"], row["srun"]["median_wall_s"]
        print(f"{size:>3} nodes: computefence {cf} s, bare srun {bare} s (cluster up in {row['cluster_up_s']} s)")
    out = REPO / "bench" / "results" / f"slurm-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
