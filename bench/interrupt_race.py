"""How often a Ctrl-C in a run's first seconds goes wrong: `fleet check --demo` sent SIGINT at
a random moment after start, N times; each outcome that is not one `computefence: interrupted`
line and exit 130 is counted and shown.

    python3 bench/interrupt_race.py                      # 30 tries, 0.1-1.6 s
    python3 bench/interrupt_race.py --tries 60 --from 0.2 --to 0.5
    PYTHONPATH=/other/checkout python3 bench/interrupt_race.py   # another checkout's code

Outcomes: "ok" (130, its last stderr line the interrupt line), "silent" (130, no line),
"ran to the end" (the run's own exit status), "traceback", "killed" (death by SIGINT, -2),
"python start" (CPython's own site import interrupted, before any ComputeFence code).
The delay counts from the process start, as a user's Ctrl-C does; the machine's load moves
the phases (imports take 0.3 s idle, over 1 s at load 7), so give the load with the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def outcome(code: int, err: str) -> str:
    lines = err.splitlines()
    if "init_import_site" in err:
        return "python start"
    if "Traceback" in err:
        return "traceback"
    if code == -signal.SIGINT:
        return "killed"
    if code != 130:
        return "ran to the end"
    if not lines or not lines[-1].startswith("computefence: interrupted"):
        return "silent"
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=30)
    parser.add_argument("--from", dest="low", type=float, default=0.1)
    parser.add_argument("--to", dest="high", type=float, default=1.6)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO)))
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as home:
        env["HOME"] = home
        for _ in range(args.tries):
            delay = random.uniform(args.low, args.high)
            process = subprocess.Popen(
                [sys.executable, "-m", "computefence", "fleet", "check", "--demo"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=home,
            )
            time.sleep(delay)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=120)
            kind = outcome(process.returncode, err)
            counts[kind] += 1
            if kind != "ok":
                print(f"{delay:.2f} s: {kind} (exit {process.returncode})", flush=True)
    load = os.getloadavg()[0]
    shown = ", ".join(f"{kind} {n}" for kind, n in counts.most_common())
    print(f"{args.tries} tries at {args.low}-{args.high} s, load {load:.1f}: {shown}")


if __name__ == "__main__":
    main()
