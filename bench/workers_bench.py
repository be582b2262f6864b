"""`fleet check --workers N` at fleet scale: client wall, CPU and memory with 1, 2, ... workers.

The pods are client_bench.py's canned-answer SSH servers (other processes answering every
probe with one recorded output), so what is measured is the client: its wall time, its CPU
(wait4 of the command, which counts its workers) and the peak PSS of its process tree. The
load average before each run is printed beside it: the servers run on the same machine, and
on a shared one so does everything else.

    python3 bench/workers_bench.py --targets 1000,10000 --workers 1,2 --repeat 1

Results go to bench/results/workers-<time>.json. No root needed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from client_bench import CannedFleet  # noqa: E402
from fleet_bench import PROBE_LIMIT_S, measure  # noqa: E402


def run_check(fleet: CannedFleet, workers: int, run_dir: Path, python: str) -> dict:
    run_dir.mkdir(parents=True)
    report = run_dir / "report.json"
    argv = [
        python,
        "-m",
        "computefence",
        "fleet",
        "check",
        "-i",
        str(fleet.inventory),
        "--format",
        "json",
        "-o",
        str(report),
        "--workers",
        str(workers),
        "--timeout",
        str(PROBE_LIMIT_S + 20),
        # Loaded cores may need long for thousands of handshakes; no pod should time out here.
        "--connect-timeout",
        "120",
    ]
    load = os.getloadavg()[0]
    result = measure(argv, env={**os.environ, "HOME": str(run_dir)}, timeout=1800)
    result["load_1min_before"] = round(load, 2)
    try:
        hosts = json.loads(report.read_text())["hosts"]
        result["ok"] = sum(1 for h in hosts if h["status"] == "ok")
        result["order_kept"] = [h["name"] for h in hosts] == [f"pod-{i:04d}" for i in range(fleet.n)]
    except (OSError, ValueError, KeyError) as exc:
        result.update(ok=0, order_kept=False, error=f"no report: {exc}")
    result["valid"] = result["ok"] == fleet.n and result["order_kept"]
    if result["valid"]:
        result.pop("stderr_tail", None)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="1000,10000", help="comma-separated fleet sizes")
    parser.add_argument("--workers", default="1,2", help="comma-separated --workers values")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per worker count (interleaved)")
    parser.add_argument("--servers", type=int, default=2, help="canned-answer server processes (default 2)")
    parser.add_argument("--ports-per-server", type=int, default=4)
    parser.add_argument("--no-warm-up", action="store_true", help="skip the untimed first run (large fleets)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--results", default=str(BENCH / "results"))
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.targets.split(",")]
    counts = [int(n) for n in args.workers.split(",")]
    results: dict = {"cpus": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)), "runs": []}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="cf-workers-bench-") as tmp:
            work = Path(tmp)
            fleet = CannedFleet(
                argparse.Namespace(
                    targets=size, servers=args.servers, ports_per_server=args.ports_per_server, cipher=None
                ),
                work,
            )
            try:
                if not args.no_warm_up:
                    print(f"== {size} targets; warming up (1 worker, untimed)", file=sys.stderr, flush=True)
                    run_check(fleet, 1, work / "warm", args.python)
                for round_ in range(args.repeat):
                    for workers in counts if round_ % 2 == 0 else list(reversed(counts)):
                        result = run_check(fleet, workers, work / f"w{workers}-{round_}", args.python)
                        result.update(targets=size, workers=workers)
                        results["runs"].append(result)
                        print(
                            f"   {size:6d} targets  --workers {workers:2d}  wall {result['wall_s']:7.2f}s  "
                            f"cpu {result['cpu_s']:7.2f}s  tree PSS {result['tree_pss_peak_mib']:7.1f} MiB  "
                            f"load {result['load_1min_before']:5.2f}  "
                            f"{'ok' if result['valid'] else 'INVALID ' + str(result.get('ok'))}",
                            file=sys.stderr,
                            flush=True,
                        )
            finally:
                fleet.close()
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"workers-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
