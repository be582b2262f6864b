"""Time reading a 100,000-host inventory, each format, beside `ansible-inventory`.

    python3 bench/inventory_bench.py [--hosts 100000] [-n 3]

Writes a ComputeFence YAML inventory, an Ansible INI inventory and an
Ansible YAML inventory of N hosts, then times `computefence inventory list
--format json` on each (the whole CLI: read, validate, build targets, print) and
`ansible-inventory --list` on the Ansible files when it is installed. Target: every
ComputeFence read under 5 s. Median of n runs. (ssh_config is left out: with ssh installed each
alias is resolved by its own `ssh -G`, one process per host.)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 5.0


def _address(i: int) -> str:
    return f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"


def write_inventories(folder: Path, hosts: int) -> dict[str, tuple[str, Path]]:
    computefence = folder / "pods.yaml"
    with computefence.open("w") as out:
        out.write("defaults: {user: root, port: 22}\nhosts:\n")
        for i in range(hosts):
            out.write(f"  - {{name: pod-{i}, host: {_address(i)}, port: 22022, tags: [sweep-7]}}\n")
    ini = folder / "hosts.ini"
    with ini.open("w") as out:
        out.write("[pods]\n")
        for i in range(hosts):
            out.write(f"pod-{i} ansible_host={_address(i)} ansible_port=22022\n")
        out.write("[pods:vars]\nansible_user=root\n")
    yml = folder / "hosts.yml"
    with yml.open("w") as out:
        out.write("pods:\n  vars: {ansible_user: root}\n  hosts:\n")
        for i in range(hosts):
            out.write(f"    pod-{i}: {{ansible_host: {_address(i)}, ansible_port: 22022}}\n")
    return {
        "computefence yaml": ("-i", computefence),
        "ansible ini": ("--ansible-inventory", ini),
        "ansible yaml": ("--ansible-inventory", yml),
    }


def timed(command: list[str], runs: int) -> float | None:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        times.append(time.perf_counter() - started)
        if result.returncode != 0:
            print(f"  {' '.join(command[:6])} ... exited {result.returncode}: {result.stderr.strip()[:200]}",
                  file=sys.stderr)
            return None
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("-n", "--runs", type=int, default=3)
    args = parser.parse_args()
    ansible = shutil.which("ansible-inventory")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        files = write_inventories(Path(tmp), args.hosts)
        print(f"{args.hosts:,} hosts, median of {args.runs} run(s)")
        for label, (flag, path) in files.items():
            command = [sys.executable, "-m", "computefence", "inventory", "list", flag, str(path), "--format", "json"]
            seconds = timed(command, args.runs)
            size = path.stat().st_size / 2**20
            verdict = "FAILED" if seconds is None else ("ok" if seconds < TARGET_S else f"over {TARGET_S:.0f} s")
            failed |= verdict != "ok"
            shown = "-" if seconds is None else f"{seconds:.2f} s"
            line = f"  computefence {label:<18} {size:5.1f} MiB  {shown:>9}  {verdict}"
            if ansible and label.startswith("ansible"):
                theirs = timed([ansible, "-i", str(path), "--list"], args.runs)
                line += f"   ansible-inventory --list: {'-' if theirs is None else f'{theirs:.2f} s'}"
            print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
