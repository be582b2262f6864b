"""Time `computefence doctor --format json` against the torch import it waits for, and
`computefence --version`.

    python3 bench/doctor_bench.py [-n 10] [--python /path/to/training/python3] [--before CHECKOUT]

Interleaved, alternating the order each round so load on a shared machine hits all alike:

- **torch import**: `PYTHON -c 'import torch'`, the floor doctor cannot go under (its probe
  imports torch in the training interpreter);
- **doctor**: `computefence doctor --format json --python PYTHON` (default: this interpreter);
- **tool only**: the same against an interpreter that does not exist (interpreter start,
  imports, probe, evaluation, rendering; no torch);
- **--version**: `computefence --version`;
- **bare python**: `python3 -c pass`, the start every command pays.

With --before, doctor and --version of another checkout of ComputeFence (its source tree, on
PYTHONPATH) run in the same rounds, for a before/after taken under the same load.

Targets (#35): doctor's median at most 0.5 s over the torch import's median, and `--version`
under 0.3 s. Exits 1 when either is missed, and says which. The load average is printed with
the figures: on a shared machine they mean little without it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from fleet_bench import user_env

OVER_TORCH_S = 0.5
VERSION_S = 0.3
NO_INTERPRETER = "/nonexistent/python3"


def timed(command: list[str], accept: tuple[int, ...] = (0,), source: str | None = None) -> tuple[float, str]:
    env = user_env()
    if source is not None:
        env["PYTHONPATH"] = source
        # -P: `-m` would put the working directory (a checkout's root) before PYTHONPATH.
        command = [command[0], "-P", *command[1:]]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if result.returncode not in accept:
        raise SystemExit(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()[-500:]}")
    return wall, result.stdout


def doctor(python: str, source: str | None = None) -> tuple[float, float, str | None]:
    command = [sys.executable, "-m", "computefence", "doctor", "--format", "json", "--python", python]
    wall, out = timed(command, accept=(0, 1), source=source)
    facts = json.loads(out)["hosts"][0]["facts"]
    return wall, facts["probe_duration_s"], (facts.get("torch") or {}).get("version")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=10)
    parser.add_argument("--python", default=sys.executable, help="training interpreter (with torch) passed to doctor")
    parser.add_argument("--before", metavar="CHECKOUT", help="another checkout to time beside this one")
    args = parser.parse_args()

    print(
        f"doctor: {sys.executable} -m computefence doctor --format json --python {{{args.python} | {NO_INTERPRETER}}}"
    )
    print(f"load average before: {load()}")
    rounds = ["torch", "doctor", "tool", "version", "python"] + (
        ["doctor@before", "version@before"] if args.before else []
    )
    walls: dict[str, list[float]] = {name: [] for name in rounds}
    probes: dict[str, list[float]] = {"doctor": [], "tool": []}
    versions = set()
    for i in range(args.runs):
        for name in rounds if i % 2 == 0 else rounds[::-1]:
            if name == "torch":
                walls[name].append(timed([args.python, "-c", "import torch"])[0])
            elif name in ("doctor", "tool"):
                wall, probe, torch_version = doctor(args.python if name == "doctor" else NO_INTERPRETER)
                walls[name].append(wall)
                probes[name].append(probe)
                if name == "doctor":
                    versions.add(torch_version)
            elif name == "doctor@before":
                walls[name].append(doctor(args.python, args.before)[0])
            elif name in ("version", "version@before"):
                source = args.before if name == "version@before" else None
                walls[name].append(timed([sys.executable, "-m", "computefence", "--version"], source=source)[0])
            else:
                walls[name].append(timed([sys.executable, "-c", "pass"])[0])
    print(f"load average after: {load()}")
    print(f"runs: {args.runs} each, interleaved; wall seconds")
    labels = {
        "torch": "torch import alone",
        "doctor": "doctor (headline)",
        "tool": "doctor, no interpreter",
        "version": "--version",
        "python": "python3 -c pass",
        "doctor@before": "doctor, --before",
        "version@before": "--version, --before",
    }
    for name, label in labels.items():
        if name not in walls:
            continue
        wall = walls[name]
        probe = f"  probe median {statistics.median(probes[name]):.3f}" if name in probes else ""
        print(f"{label:24s} median {statistics.median(wall):.3f}  min {min(wall):.3f}  max {max(wall):.3f}{probe}")
    if versions == {None}:
        print(f"WARNING: {args.python} imported no torch; the headline does not include a torch import")
    else:
        print(f"torch seen by the probe: {', '.join(sorted(str(v) for v in versions))}")
    # Each round's doctor less the same round's torch import: load that drifts between rounds
    # cancels out of the pair.
    paired = [d - t for d, t in zip(walls["doctor"], walls["torch"])]
    print(f"doctor less the torch import, same round: median {statistics.median(paired):.3f}  min {min(paired):.3f}")
    over = statistics.median(walls["doctor"]) - statistics.median(walls["torch"])
    version = statistics.median(walls["version"])
    over_met, version_met = over <= OVER_TORCH_S, version < VERSION_S
    print(f"doctor over the torch import: {over:.3f} s (target <= {OVER_TORCH_S} s): {'met' if over_met else 'MISSED'}")
    print(f"--version: {version:.3f} s (target < {VERSION_S} s): {'met' if version_met else 'MISSED'}")
    return 0 if over_met and version_met else 1


if __name__ == "__main__":
    sys.exit(main())
