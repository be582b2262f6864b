"""`fleet check --workers N`: the targets probed in N processes, one report equal to one
process's (order, findings, summary, exit code); Ctrl-C stops every worker."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import CLI, HEALTHY, SPOTLESS, cli_subprocess_env, host_entry, write_inventory
from sshfleet import PodSpec, closed_port

from computefence.connectors.interface import Outcome, host_report
from computefence.demo import DEMO_RECORDING
from computefence.models import HostReport, HostStatus, Target
from computefence.session import open_session

# What differs between two runs of the same pods whatever the split: when, and how long.
_TIMING = {"generated_at", "duration_s", "probe_duration_s"}


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in _TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120, env=os.environ.copy())


def test_replay_with_two_workers_gives_the_one_process_report():
    one = _run("fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "json", "--workers", "1")
    two = _run("fleet", "check", "--replay", str(DEMO_RECORDING), "--format", "json", "--workers", "2")
    assert one.returncode == two.returncode == 1, (one.stderr, two.stderr)
    assert len(json.loads(one.stdout)["hosts"]) == 6
    assert _untimed(json.loads(two.stdout)) == _untimed(json.loads(one.stdout))
    # Progress still counts every pod, once.
    assert [line for line in two.stderr.splitlines() if "/6]" in line][-1].startswith("computefence: [6/6]")


class _Pids:
    """Answers every target with the id of the process that checked it; `die_on` ends that
    process instead, as a worker killed mid-run."""

    def __init__(self, die_on: str | None = None):
        self.die_on = die_on

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        if target.name == self.die_on:
            os._exit(3)
        return host_report(target, Outcome(HostStatus.NOT_CHECKABLE, f"pid {os.getpid()}"), 0.0)


def _targets(count: int) -> list[Target]:
    return [Target(name=f"pod-{i:02d}", host="127.0.0.1", port=22) for i in range(count)]


def test_each_worker_is_its_own_process_and_the_plan_order_stands():
    targets = _targets(12)
    with open_session(targets, connector=_Pids(), workers=2) as session:
        hosts = session.probe()
    assert [h.name for h in hosts] == [t.name for t in targets]
    pids = {h.reason for h in hosts}
    assert len(pids) == 2 and f"pid {os.getpid()}" not in pids


class _Frozen:
    """Answers every target with how many objects its process's collector leaves alone."""

    async def check(self, target: Target, params: dict[str, Any]) -> HostReport:
        return host_report(target, Outcome(HostStatus.NOT_CHECKABLE, str(gc.get_freeze_count())), 0.0)


def test_workers_leave_the_sessions_objects_to_share_and_the_session_collects_them_again():
    # A worker's collector writing to every inherited object would copy its pages (#35).
    with open_session(_targets(4), connector=_Frozen(), workers=2) as session:
        hosts = session.probe()
    assert all(int(h.reason) > 10_000 for h in hosts), [h.reason for h in hosts]
    assert gc.get_freeze_count() == 0


def test_a_worker_that_dies_spoils_only_its_own_pods():
    targets = _targets(12)
    with open_session(targets, connector=_Pids(die_on="pod-03"), workers=2) as session:
        hosts = session.probe()
    by_name = {h.name: h for h in hosts}
    dead = by_name["pod-03"]
    assert dead.status is HostStatus.PROBE_FAILED
    assert "worker process" in dead.reason and "exit status 3" in dead.reason
    # The other worker's pods are answered as usual.
    assert any(h.status is HostStatus.NOT_CHECKABLE and h.reason.startswith("pid ") for h in hosts)
    assert [h.name for h in hosts] == [t.name for t in targets]


@pytest.mark.sshd
def test_real_pods_with_two_and_three_workers_give_the_one_process_report(ssh_fleet, start_pods, run_cli, tmp_path):
    pods = start_pods(
        PodSpec("work-a", **SPOTLESS),
        PodSpec("work-b", **HEALTHY),
        PodSpec("work-c", **dict(SPOTLESS, torch="cpu")),
        PodSpec("work-d", **SPOTLESS),
        PodSpec("work-e", **HEALTHY),
    )
    entries = [host_entry(p) for p in pods] + [{"name": "work-f", "host": "127.0.0.1", "port": closed_port()}]
    inventory = write_inventory(tmp_path / "pool.yaml", ssh_fleet, entries, trusted=pods)

    runs = {}
    for workers in ("1", "2", "3"):
        result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--workers", workers)
        runs[workers] = (result.code, result.report)
    code, one = runs["1"]
    assert code == 1 and [h.name for h in one.hosts] == [e["name"] for e in entries]
    for workers in ("2", "3"):
        other_code, other = runs[workers]
        assert other_code == code
        assert _untimed(other.model_dump(mode="json")) == _untimed(one.model_dump(mode="json")), workers


@pytest.mark.sshd
def test_ctrl_c_stops_both_workers_writes_nothing_and_exits_130(ssh_fleet, start_pods, home, tmp_path):
    # Two pods in each of the two slices (stuck-a and -c hash to one, -b and -d to the other).
    stuck = start_pods(
        *(PodSpec(f"stuck-{c}", files={"/usr/local/bin/python3": "#!/bin/sh\nexec sleep 600\n"}) for c in "abcd")
    )
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(p) for p in stuck], trusted=stuck)
    out = tmp_path / "report.json"
    proc = subprocess.Popen(
        [*CLI, "fleet", "check", "-i", str(inventory), "--workers", "2", "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_subprocess_env(home),
        start_new_session=True,
    )
    try:
        for pod in stuck:
            pod.wait_for_process("sleep 600")
        workers = _children(proc.pid)
        assert len(workers) == 2
        # As a terminal's Ctrl-C: the whole foreground group gets it.
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == 130
    assert stdout == ""
    assert stderr.strip().splitlines()[-1] == (
        f"computefence: interrupted; 4 of 4 pods were not checked; nothing written (--output {out} left untouched)"
    )
    assert "Traceback" not in stderr
    assert not out.exists()
    assert all(not Path(f"/proc/{pid}").exists() for pid in workers)
    # Each worker closed its connections: no sshd session is left on any pod.
    deadline = time.monotonic() + 5
    while any(p.session_processes() for p in stuck) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p.name for p in stuck if p.session_processes()] == []


@pytest.mark.sshd
def test_workers_of_a_killed_run_stop_at_once(ssh_fleet, start_pods, home, tmp_path):
    stuck = start_pods(
        *(PodSpec(f"stuck-{c}", files={"/usr/local/bin/python3": "#!/bin/sh\nexec sleep 600\n"}) for c in "ab")
    )
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(p) for p in stuck], trusted=stuck)
    proc = subprocess.Popen(
        [*CLI, "fleet", "check", "-i", str(inventory), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=cli_subprocess_env(home),
    )
    try:
        for pod in stuck:
            pod.wait_for_process("sleep 600")
        workers = _children(proc.pid)
        assert len(workers) == 2
        proc.kill()
        proc.wait()
        # Their parent gone, the workers stop rather than probe on for the whole deadline.
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in workers if Path(f"/proc/{pid}").exists()] == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _children(pid: int) -> list[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        tasks = Path(f"/proc/{pid}/task")
        found = [int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()]
        if found:
            return found
        time.sleep(0.1)
    return []
