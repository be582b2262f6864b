"""Time `computefence doctor --format json` on this machine, without torch.

    python3 bench/doctor_bench.py [-n 10] [--python /nonexistent/python3]

The training interpreter defaults to a path that does not exist, so the figure is the
tool itself (interpreter start, imports, probe, evaluation, rendering), not the torch
import. Target: median under 2 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

TARGET_S = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=10)
    parser.add_argument("--python", default="/nonexistent/python3", help="training interpreter passed to doctor")
    args = parser.parse_args()

    command = [sys.executable, "-m", "computefence", "doctor", "--format", "json", "--python", args.python]
    print("command:", " ".join(command))
    wall, probe = [], []
    for _ in range(args.runs):
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        wall.append(time.perf_counter() - started)
        if result.returncode not in (0, 1):
            print(f"doctor exited {result.returncode}: {result.stderr.strip()}", file=sys.stderr)
            return 2
        probe.append(json.loads(result.stdout)["hosts"][0]["facts"]["probe_duration_s"])

    median = statistics.median(wall)
    print(f"runs: {args.runs}")
    print(f"wall  median {median:.3f} s  min {min(wall):.3f} s  max {max(wall):.3f} s")
    print(f"probe median {statistics.median(probe):.3f} s (inside the run)")
    print(f"target < {TARGET_S:.1f} s: {'met' if median < TARGET_S else 'MISSED'}")
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
