"""Time reading a 100,000-host inventory, each format, beside `ansible-inventory`.

    python3 bench/inventory_bench.py [--hosts 100000] [--ssh-hosts 2000] [-n 3] [--ansible-runs 1] [--no-ansible]

Writes a ComputeFence YAML inventory, an Ansible INI inventory and an Ansible YAML inventory
of N hosts, then times the whole CLI, `computefence inventory list --format json` (read,
validate, build targets, print), on each:

  built-in      ComputeFence's own readers; for the Ansible files as on a machine without
                Ansible (the CLI run with ansible-inventory hidden from it).
  with Ansible  `--ansible-inventory FILE` where Ansible is installed: the built-in reader's
                limits pre-check, then `ansible-inventory --list`, then its JSON to targets.
  ansible-inventory --list alone: what a user would run instead.

Target: every built-in read under 5 s, in time linear in the hosts. Each figure is the median
wall time of its runs with the CPU seconds (user + system) of the same run; the machine's load
average is printed before and after, since a shared machine slows wall time. Every run's
output is checked: N targets, and the same targets from the built-in and the Ansible paths.

Then an ssh_config of --ssh-hosts Host entries (two aliases each, a wildcard block and a Match
block among them): the built-in parser (ssh hidden from PATH) beside the default resolver,
one `ssh -G` per alias, 16 at a time; both must give the same targets.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleet_bench import user_env

TARGET_S = 5.0
TIMEOUT_S = 900
# The CLI as on a machine without Ansible: the Ansible source falls back to the built-in reader.
WITHOUT_ANSIBLE = (
    "import sys, computefence.sources.ansible as a; a.ansible_inventory_command = lambda: None; "
    "from computefence.cli import main; sys.exit(main())"
)


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


class Timed:
    def __init__(self, wall: float, cpu: float, stdout: str):
        self.wall, self.cpu, self.stdout = wall, cpu, stdout

    def __str__(self) -> str:
        return f"{self.wall:6.2f} s ({self.cpu:5.2f} CPU-s)"


def timed(command: list[str], runs: int) -> Timed | None:
    """Median wall time of `runs` runs, the CPU seconds of that run, and the last output."""
    results = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, env=user_env())
        except subprocess.TimeoutExpired:
            print(f"  {' '.join(command[:6])} ... gave no answer in {TIMEOUT_S} s", file=sys.stderr)
            return None
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if result.returncode != 0:
            print(
                f"  {' '.join(command[:6])} ... exited {result.returncode}: {result.stderr.strip()[:200]}",
                file=sys.stderr,
            )
            return None
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        results.append(Timed(wall, cpu, result.stdout))
    results.sort(key=lambda r: r.wall)
    return results[len(results) // 2]


def write_ssh_config(folder: Path, hosts: int) -> Path:
    config = folder / "ssh_config"
    with config.open("w") as out:
        out.write("Host *.internal\n  User admin\n\n")
        for i in range(hosts):
            out.write(
                f"Host gpu-{i} g{i}\n  HostName {_address(i)}\n  User root\n  Port {2000 + i % 100}\n"
                f"  IdentityFile ~/.ssh/id_{i % 3}\n\n"
            )
            if i == hosts // 2:
                out.write("Match host 10.0.*\n  ForwardAgent no\n\n")
        out.write("Host gpu-1*\n  ProxyJump bastion\n\nHost *\n  ServerAliveInterval 30\n")
    return config


def targets_of(run: Timed) -> list[tuple]:
    return [(t["name"], t["host"], t["port"], t["user"]) for t in json.loads(run.stdout)["targets"]]


def verdict(run: Timed | None, expected: int, other: Timed | None = None, disagreement: str = "") -> str:
    """'ok', or what is wrong with `run`: none, not `expected` targets, other targets than the
    `other` path gave (`disagreement` says which paths), or over the target time."""
    if run is None:
        return "FAILED"
    targets = targets_of(run)
    if len(targets) != expected:
        return f"{len(targets)} targets, not {expected}"
    if other is not None and targets_of(other) != targets:
        return disagreement
    return "ok" if run.wall < TARGET_S else f"over {TARGET_S:.0f} s"


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def ssh_config_row(folder: Path, args: argparse.Namespace) -> bool:
    config = write_ssh_config(folder, args.ssh_hosts)
    listing = [
        sys.executable,
        "-m",
        "computefence",
        "inventory",
        "list",
        "--ssh-config",
        str(config),
        "--format",
        "json",
    ]
    no_tools = folder / "no-tools"
    no_tools.mkdir()
    parser = timed(["env", f"PATH={no_tools}", *listing], args.runs)
    with_ssh = timed(listing, args.ansible_runs) if shutil.which("ssh") else None
    found = verdict(parser, 2 * args.ssh_hosts, with_ssh, "the built-in parser and ssh -G disagree")
    print(
        f"\n  {'ssh_config':<18} {2 * args.ssh_hosts:>6,} aliases  built-in parser {parser or '-'!s:<24} "
        f"one ssh -G per alias {with_ssh or '-'!s:<24} {found}",
        flush=True,
    )
    return found == "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--ssh-hosts", type=int, default=2_000, help="Host entries of the ssh_config (0: none)")
    parser.add_argument("-n", "--runs", type=int, default=3, help="runs of each built-in read (median)")
    parser.add_argument(
        "--ansible-runs",
        type=int,
        default=1,
        help="runs of each read through Ansible (at 100,000 hosts ansible-inventory takes about 40 s)",
    )
    parser.add_argument("--no-ansible", action="store_true", help="leave out the reads through Ansible")
    args = parser.parse_args()
    ansible = None if args.no_ansible else shutil.which("ansible-inventory")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        files = write_inventories(Path(tmp), args.hosts)
        print(
            f"{args.hosts:,} hosts; built-in: median of {args.runs} run(s), through Ansible: {args.ansible_runs}; "
            f"load average {load()}"
        )
        print(f"  {'format':<18} {'size':>9}  {'built-in':<24} {'with Ansible':<24} ansible-inventory --list")
        for label, (flag, path) in files.items():
            listing = ["inventory", "list", flag, str(path), "--format", "json"]
            builtin = timed([sys.executable, "-c", WITHOUT_ANSIBLE, *listing], args.runs)
            through = theirs = None
            if ansible and flag == "--ansible-inventory":
                through = timed([sys.executable, "-m", "computefence", *listing], args.ansible_runs)
                theirs = timed([ansible, "-i", str(path), "--list"], args.ansible_runs)
            found = verdict(builtin, args.hosts, through, "the built-in reader and Ansible disagree")
            failed |= found != "ok"
            print(
                f"  {label:<18} {path.stat().st_size / 2**20:5.1f} MiB  {builtin or '-'!s:<24} "
                f"{through or '-'!s:<24} {theirs or '-'!s:<24}  {found}",
                flush=True,
            )
        if args.ssh_hosts:
            failed |= not ssh_config_row(Path(tmp), args)
        print(f"load average after: {load()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
