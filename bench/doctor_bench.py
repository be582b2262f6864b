"""Time `computefence doctor --format json` on this machine, torch import included.

    python3 bench/doctor_bench.py [-n 10] [--python /path/to/training/python3]

The headline is what a user waits for: doctor against a training interpreter that has torch
(default: this interpreter), so the torch import on the probe's side counts. A second figure,
interleaved with the first, runs doctor against an interpreter that does not exist: the tool
alone (interpreter start, imports, probe, evaluation, rendering). Target: headline median
under 2 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from fleet_bench import user_env

TARGET_S = 2.0
NO_INTERPRETER = "/nonexistent/python3"


def one_run(python: str) -> tuple[float, float, str | None]:
    command = [sys.executable, "-m", "computefence", "doctor", "--format", "json", "--python", python]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=user_env())
    wall = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"doctor exited {result.returncode}: {result.stderr.strip()}")
    facts = json.loads(result.stdout)["hosts"][0]["facts"]
    return wall, facts["probe_duration_s"], (facts.get("torch") or {}).get("version")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=10)
    parser.add_argument("--python", default=sys.executable, help="training interpreter (with torch) passed to doctor")
    args = parser.parse_args()

    print(
        f"command: {sys.executable} -m computefence doctor --format json --python {{{args.python} | {NO_INTERPRETER}}}"
    )
    figures: dict[str, dict[str, list]] = {name: {"wall": [], "probe": [], "torch": []} for name in ("torch", "tool")}
    for i in range(args.runs):
        # Interleaved, alternating which goes first, so load on the shared machine hits both alike.
        order = [("torch", args.python), ("tool", NO_INTERPRETER)]
        for name, python in order if i % 2 == 0 else order[::-1]:
            wall, probe, torch_version = one_run(python)
            figures[name]["wall"].append(wall)
            figures[name]["probe"].append(probe)
            figures[name]["torch"].append(torch_version)

    print(f"runs: {args.runs} each")
    for name, label in (("torch", "with torch (headline)"), ("tool", "tool only, no interpreter")):
        wall, probe = figures[name]["wall"], figures[name]["probe"]
        print(
            f"{label:28s} wall median {statistics.median(wall):.3f} s  min {min(wall):.3f} s  max {max(wall):.3f} s"
            f"  probe median {statistics.median(probe):.3f} s"
        )
    versions = set(figures["torch"]["torch"])
    if versions == {None}:
        print(f"WARNING: {args.python} imported no torch; the headline does not include a torch import")
    else:
        print(f"torch seen by the probe: {', '.join(sorted(str(v) for v in versions))}")
    median = statistics.median(figures["torch"]["wall"])
    print(f"target < {TARGET_S:.1f} s with torch: {'met' if median < TARGET_S else 'MISSED'}")
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
