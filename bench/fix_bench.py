"""Time `computefence fleet fix --apply --yes` against what a user does instead: paste each
pod's fix commands over ssh, one pod after the other, then run `fleet check` to see them work.

Needs root (tests/sshfleet.py pods). Every pod gets the same three faults: HF_HOME unset (the HF
cache on the container disk), a 64 MB /dev/shm, and a checkpoint dir whose parent is missing.
Each timed run starts fresh pods (an apply changes them). Both ways must leave every one of those
findings gone, or the run is marked invalid.

    python3 bench/fix_bench.py --pods 8 24 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "fleet")]

from fleet_helpers import cli_subprocess_env, host_entry, write_inventory  # noqa: E402
from sshfleet import PodSpec, SshFleet  # noqa: E402

CHECKS = ("storage.hf-cache", "system.shm", "storage.output-dir")
CLI = [sys.executable, "-m", "computefence"]


def _specs(n: int, run: int) -> list[PodSpec]:
    return [
        PodSpec(
            f"fix-{run}-{i:03d}",
            nvidia_smi="h100x1",
            torch="cu124",
            workspace_size="20G",
            env={"RUNPOD_POD_ID": f"bench{i}"},
        )
        for i in range(n)
    ]


def _only() -> list[str]:
    return [arg for check in CHECKS for arg in ("--only", check)]


def _fleet(fleet: SshFleet, base: Path, n: int, run: int):
    pods = fleet.start(_specs(n, run))
    inventory = write_inventory(
        base / f"pods-{run}.yaml",
        fleet,
        [host_entry(p) for p in pods],
        trusted=pods,
        checks={"output_dir": "/workspace/runs/1/ckpt"},
    )
    return pods, inventory


def _left(env: dict[str, str], inventory: Path) -> int:
    """Findings of the three checks still there after the fixes."""
    done = subprocess.run(
        [*CLI, "fleet", "check", "-i", str(inventory), "--format", "json", *_only()],
        env=env,
        capture_output=True,
        text=True,
    )
    report = json.loads(done.stdout)
    return sum(1 for h in report["hosts"] for f in h["findings"] if f["severity"] in ("warn", "block"))


def time_computefence(env: dict[str, str], inventory: Path, out: Path) -> tuple[float, bool]:
    started = time.monotonic()
    done = subprocess.run(
        [*CLI, "fleet", "fix", "-i", str(inventory), "--apply", "--yes", "--format", "json", "-o", str(out), *_only()],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    summary = json.loads(out.read_text())["summary"] if out.exists() else {}
    return wall, done.returncode == 0 and summary.get("fixed") == len(CHECKS) * _pods(inventory)


def _pods(inventory: Path) -> int:
    import yaml

    return len(yaml.safe_load(inventory.read_text())["hosts"])


def time_by_hand(env: dict[str, str], inventory: Path, identity: Path) -> tuple[float, bool]:
    """The plan's commands pasted over ssh, pod after pod, then fleet check to see them work."""
    plan = json.loads(
        subprocess.run(
            [*CLI, "fleet", "fix", "-i", str(inventory), "--format", "json", *_only()],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
    )
    import yaml

    document = yaml.safe_load(inventory.read_text())
    hosts = {h["name"]: h for h in document["hosts"]}
    started = time.monotonic()
    for host in plan["hosts"]:
        entry = hosts[host["name"]]
        for step in (s for s in host["steps"] if s["status"] == "planned"):
            subprocess.run(
                [
                    "ssh",
                    "-o",
                    f"UserKnownHostsFile={document['known_hosts']}",
                    "-o",
                    "BatchMode=yes",
                    "-i",
                    str(identity),
                    "-p",
                    str(entry["port"]),
                    f"root@{entry['host']}",
                    step["run"],
                ],
                env=env,
                capture_output=True,
                check=True,
            )
    left = _left(env, inventory)
    return time.monotonic() - started, left == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[8, 24])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("fix_bench needs root (sshd pods in namespaces)", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory(prefix="cf-fix-bench-") as tmp:
        base = Path(tmp)
        home = base / "home"
        (home / ".ssh").mkdir(parents=True)
        env = cli_subprocess_env(home)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        fleet = SshFleet(base / "fleet")
        run = 0
        for n in args.pods:
            rows: dict[str, list[float]] = {"computefence": [], "by hand": []}
            valid = {"computefence": True, "by hand": True}
            for _ in range(args.runs):
                for way in ("computefence", "by hand"):
                    run += 1
                    pods, inventory = _fleet(fleet, base, n, run)
                    try:
                        if way == "computefence":
                            wall, ok = time_computefence(env, inventory, base / f"fix-{run}.json")
                        else:
                            wall, ok = time_by_hand(env, inventory, fleet.identity_file)
                    finally:
                        for pod in pods:
                            fleet.stop(pod)
                    rows[way].append(wall)
                    valid[way] = valid[way] and ok
            for way, walls in rows.items():
                row = {
                    "pods": n,
                    "way": way,
                    "median_s": round(statistics.median(walls), 2),
                    "min_s": round(min(walls), 2),
                    "runs": len(walls),
                    "valid": valid[way],
                }
                results.append(row)
                print(json.dumps(row), flush=True)
        fleet.stop_all()
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "fix_bench.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"load average {os.getloadavg()[0]:.1f}; steps per pod: {len(CHECKS) + 1} (hf-cache has two)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
