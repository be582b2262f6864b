"""A pool's history at scale: `report history` and `hosts` over 1,000 pods x 96 runs.

    python3 bench/history_bench.py [--pods 1000] [--runs 96] [--repeat 3] [--before CHECKOUT]

The fleet is the demo recording repeated under 1,000 names (bench/html_bench.py), each pod a
Vast pod on one of 700 machines, checked once by `fleet check --replay` (the whole CLI); the
run is saved into a --history directory as `fleet check --history` saves it (its digest
beside it), then linked under 95 more run names with the digest copied (a link is the same
file: its size and time, which the digest names, match). Timed, each as its own process
(fleet_bench.measure: wall, CPU, peak RSS), medians of --repeat:

- `report history DIR --runs 12` and `--runs 96`, and `hosts --history DIR` (every run);
- `report history DIR --runs 12` with the 12 newest digests removed first: the cost of
  digesting a run that has none (a history saved before digests, or a digest gone stale);
- with --before, each of the first three by another checkout (on PYTHONPATH) too, in the same
  round, right after this one's.

Target (#35): 1,000 pods x 96 runs in at most 10 s and 300 MB. Exits 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from fleet_bench import measure
from html_bench import make_recording

TARGET_S, TARGET_MIB = 10.0, 300.0


def cli(*args: str, source: str | None = None) -> dict:
    env = dict(os.environ)
    # -P: `-m` would put the working directory (a checkout's root) before PYTHONPATH.
    isolated = []
    if source is not None:
        env["PYTHONPATH"] = source
        isolated = ["-P"]
    result = measure([sys.executable, *isolated, "-m", "computefence", *args], env=env, timeout=1800)
    if result["returncode"] not in (0, 1):
        raise SystemExit(f"computefence {' '.join(args)} exited {result['returncode']}: {result['stderr_tail']}")
    return result


def with_machines(recording: Path, machines: int) -> None:
    """Each recorded pod a Vast pod; pods share `machines` machines, as rentals come back."""
    for index, path in enumerate(sorted(recording.glob("*.json"))):
        document = json.loads(path.read_text())
        document["target"]["provider"] = {
            "provider": "vast",
            "pod_id": str(100000 + index),
            "machine_id": str(20000 + index % machines),
            "gpu_type": "H100 SXM",
        }
        path.write_text(json.dumps(document))


def build_history(work: Path, pods: int, runs: int) -> Path:
    from computefence.operations.history import History, digest_path
    from computefence.render.json import load_report

    recording = work / "recording"
    make_recording(recording, pods)
    with_machines(recording, max(1, pods * 7 // 10))
    checked = work / "run.json"
    cli("fleet", "check", "--replay", str(recording), "--format", "json", "-o", str(checked))
    report = load_report(checked)
    history = work / "history"
    history.mkdir()
    started = time.perf_counter()
    first = History(history, keep=runs + 1).save(report)
    saved_s = time.perf_counter() - started
    print(
        f"one run: {first.stat().st_size / 1e6:.1f} MB, its digest {digest_path(first).stat().st_size / 1e3:.0f} KB;"
        f" History.save {saved_s:.2f} s (digest included)"
    )
    when = datetime.strptime(first.stem, "%Y%m%dT%H%M%SZ")
    for step in range(1, runs):
        # Names a second apart after the first: sorted as the runs of one pool.
        stamp = (when + timedelta(seconds=step)).strftime("%Y%m%dT%H%M%SZ")
        os.link(first, history / f"{stamp}.json")
        shutil.copy(digest_path(first), digest_path(history / f"{stamp}.json"))
    return history


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=96)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", metavar="CHECKOUT", help="another checkout: its `report history --runs 12`, once")
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="cf-history-") as tmp:
        work = Path(tmp)
        history = build_history(work, args.pods, args.runs)
        page, ledger = work / "page.html", work / "ledger.json"
        timed = {
            "report history --runs 12": ["report", "history", str(history), "--runs", "12", "-o", str(page)],
            f"report history --runs {args.runs}": [
                *("report", "history", str(history), "--runs", str(args.runs), "-o", str(page))
            ],
            f"hosts (all {args.runs} runs)": [
                "hosts",
                "--history",
                str(history),
                "--format",
                "json",
                "-o",
                str(ledger),
            ],
        }
        figures: dict[str, list[dict]] = {name: [] for name in timed}
        if args.before:
            figures.update({f"{name}, --before": [] for name in timed})
        figures["report history --runs 12, no digests"] = []
        for _ in range(args.repeat):
            for name, argv in timed.items():
                figures[name].append(cli(*argv))
                if args.before:
                    figures[f"{name}, --before"].append(cli(*argv, source=args.before))
            for digest in sorted(history.glob("*.digest"))[-12:]:
                digest.unlink()
            figures["report history --runs 12, no digests"].append(cli(*timed["report history --runs 12"]))
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{args.pods} pods; medians of {args.repeat} (wall s, CPU s, peak RSS MiB)")
        for name, results in figures.items():
            wall = statistics.median(r["wall_s"] for r in results)
            cpu = statistics.median(r["cpu_s"] for r in results)
            rss = statistics.median(r["maxrss_mib"] for r in results)
            print(f"  {name:50s} {wall:8.2f} {cpu:8.2f} {rss:8.1f}")
        headline = figures[f"report history --runs {args.runs}"]
        wall = statistics.median(r["wall_s"] for r in headline)
        rss = statistics.median(r["maxrss_mib"] for r in headline)
        met = wall <= TARGET_S and rss <= TARGET_MIB
        print(
            f"target {args.runs} runs <= {TARGET_S:.0f} s and <= {TARGET_MIB:.0f} MiB:"
            f" {wall:.2f} s, {rss:.0f} MiB: {'met' if met else 'MISSED'}"
        )
        return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
