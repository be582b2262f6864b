"""`computefence fleet watch` against real training runs in sshd pods: real torch and real
Transformers (this test run's own, mounted read-only into each pod), real `torchrun
--nproc_per_node=2` on CPU with gloo. The HF Trainer (tests/fleet/real_jobs/hf_trainer.py)
and a plain torch loop (real_jobs/plain_loop.py) each give exactly their finding. Only the
GPU's utilisation is a fake (fake nvidia-smi): there is no GPU here."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from fleet_helpers import host_entry, started_pods, write_inventory
from sshfleet import Pod, PodSpec
from trainer_pods import ACTIVITY

from computefence.probe.watch_files import _loss_patterns

pytestmark = pytest.mark.sshd

JOBS = Path(__file__).parent / "real_jobs"
FILES = {
    "/opt/job/train.py": (JOBS / "hf_trainer.py").read_text(),
    "/opt/job/loop.py": (JOBS / "plain_loop.py").read_text(),
}
BUSY_GPU = json.dumps({"utilization": [95], "memory_used_mib": [71000], "apps": []})
LOOP_REGEX = r"train/loss (\S+)"
POLICY = f"""\
overrides:
  - match: {{name: "real-loop*"}}
    job:
      loss_regex: '{LOOP_REGEX}'
"""
TRAINER = ["/usr/local/bin/torchrun", "--nproc_per_node=2", "train.py"]
LOOP = ["/usr/local/bin/torchrun", "--nproc_per_node=2", "loop.py"]
# Each pod: the job's working directory and command line (None: no job at all), and the file
# that shows it has got where the test needs it.
PODS = {
    "real-healthy": (
        "/opt/job",
        [*TRAINER, "--output_dir", "/workspace/out", "--max_steps", "240"],
        "/workspace/out/checkpoint-200",
    ),
    "real-plateau": (
        "/opt/job",
        [*TRAINER, "--output_dir", "/workspace/out", "--labels", "uninformative", "--max_steps", "240"],
        "/workspace/out/checkpoint-200",
    ),
    "real-ephemeral": (
        "/root",
        [*TRAINER[:2], "/opt/job/train.py", "--output_dir", "/root/out", "--max_steps", "100"],
        "/root/out/checkpoint-100",
    ),
    "real-loop-nan": ("/opt/job", [*LOOP, "--lr", "1e3", "--steps", "100"], None),
    "real-loop-stalled": ("/opt/job", [*LOOP, "--steps", "100000", "--step_seconds", "0.05"], None),
    "real-loop-healthy": ("/opt/job", [*LOOP, "--steps", "150"], None),
    "real-no-job": (None, None, None),
}


def start_job(pod: Pod, cwd: str, argv: list[str]) -> None:
    """`cd CWD && nohup ARGV > /workspace/train.log 2>&1 &`, in the pod's namespaces."""
    assert pod.sshd_pid is not None
    script = f"cd {shlex.quote(cwd)} && exec {shlex.join(argv)} > /workspace/train.log 2>&1"
    subprocess.Popen(
        ["nsenter", "-t", str(pod.sshd_pid), "-m", "-p", "-r", "--", "/bin/sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def in_pod(pod: Pod, relative: str) -> Path:
    return Path(str(pod.merged) + relative)


def wait_until(pod: Pod, ready, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.5)
    log = pod.in_namespace(
        ["sh", "-c", f"tail -c 2000 {shlex.quote(str(in_pod(pod, '/workspace/train.log')))} || true"]
    )
    raise AssertionError(f"{pod.name}: {what} did not happen in {timeout:.0f} s\n{log}")


def exists(pod: Pod, relative: str) -> bool:
    return bool(
        pod.in_namespace(["sh", "-c", f"test -e {shlex.quote(str(in_pod(pod, relative)))} && echo y || true"]).strip()
    )


def logged_lines(pod: Pod, word: str) -> int:
    text = pod.in_namespace(["sh", "-c", f"cat {shlex.quote(str(in_pod(pod, '/workspace/train.log')))} || true"])
    return text.count(word)


def rank_pid(pod: Pod, rank: int) -> tuple[int, int]:
    """(host pid, pod pid) of the worker with RANK=rank."""
    for host_pid, command in pod.pid_namespace_processes():
        if "torchrun" in command:
            continue
        try:
            environ = Path(f"/proc/{host_pid}/environ").read_bytes().split(b"\0")
            status = Path(f"/proc/{host_pid}/status").read_text()
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ:
            pod_pid = re.search(r"^NSpid:.*\s(\d+)$", status, re.MULTILINE)
            assert pod_pid is not None
            return host_pid, int(pod_pid.group(1))
    raise AssertionError(f"no rank {rank} in {pod.name}")


@pytest.fixture(scope="module")
def real_runs(ssh_fleet, tmp_path_factory):
    specs = [
        PodSpec(
            name,
            nvidia_smi="h100x1",
            workspace_size="200G",
            real_torch=True,
            files=dict(FILES, **({ACTIVITY: BUSY_GPU} if argv else {})),
        )
        for name, (_, argv, _) in PODS.items()
    ]
    with started_pods(ssh_fleet, specs) as pods:
        for name, (cwd, argv, _) in PODS.items():
            if argv is not None:
                start_job(pods[name], cwd, argv)
        for name, (_, _, ready) in PODS.items():
            if ready is not None:
                wait_until(pods[name], lambda pod=pods[name], ready=ready: exists(pod, ready), ready)
        for name in ("real-loop-nan", "real-loop-healthy", "real-loop-stalled"):
            wait_until(pods[name], lambda pod=pods[name]: logged_lines(pod, "train/loss") >= 10, "10 loss lines")
        # One rank stopped: the other blocks in its next all-reduce, and nothing is written.
        stalled = pods["real-loop-stalled"]
        host_pid, pod_pid = rank_pid(stalled, 1)
        os.kill(host_pid, 19)  # SIGSTOP
        time.sleep(2)
        # As if 20 minutes had passed since (the job writes nothing more: it cannot).
        stalled.in_namespace(["touch", "-d", "20 minutes ago", str(in_pod(stalled, "/workspace/train.log"))])
        tmp = tmp_path_factory.mktemp("real-watch")
        inventory = write_inventory(
            tmp / "pods.yaml",
            ssh_fleet,
            [host_entry(pod) for pod in pods.values()],
            trusted=list(pods.values()),
            checks={},
        )
        policy = tmp / "computefence.yaml"
        policy.write_text(POLICY)
        yield inventory, policy, pod_pid


def problems(host) -> dict[str, list]:
    found: dict[str, list] = {}
    for finding in host.findings:
        if finding.severity.value in ("warn", "block"):
            found.setdefault(finding.check, []).append(finding)
    return found


def test_each_real_run_gives_exactly_its_finding(real_runs, run_cli):
    inventory, policy, stopped_pid = real_runs
    result = run_cli("fleet", "watch", "--once", "-i", str(inventory), "--policy", str(policy), "--format", "json")
    hosts = {h.name: h for h in result.report.hosts}
    assert all(h.status.value == "ok" for h in hosts.values()), {h.name: h.reason for h in hosts.values()}
    found = {name: problems(host) for name, host in hosts.items()}
    assert {name: sorted(checks) for name, checks in found.items()} == {
        "real-healthy": [],
        "real-plateau": ["run.loss-plateau"],
        "real-ephemeral": ["run.checkpoint-ephemeral"],
        "real-loop-nan": ["run.loss-nan"],
        "real-loop-stalled": ["run.stalled"],
        "real-loop-healthy": [],
        "real-no-job": ["run.no-job"],
    }

    # The plateau is judged against what 2 ranks of Transformers 5 log: 2 x ln 2, not ln 2.
    (plateau,) = found["real-plateau"]["run.loss-plateau"]
    assert "2 x ln(2) = 1.386" in plateau.message and "Transformers 5." in plateau.message
    assert re.search(r"logged over steps \d+-2[0-4]\d \(\d+ steps watched\)", plateau.message), plateau.message
    # The healthy run also sat near chance for its first steps; its loss then fell.
    healthy = hosts["real-healthy"].facts.watch
    assert healthy.log.losses[-1] < 0.5 and healthy.processes.processes[0].versions["transformers"].startswith("5.")

    # Checkpoints on the container disk: once, under /root/out, whose cwd (/root) holds it.
    (ephemeral,) = found["real-ephemeral"]["run.checkpoint-ephemeral"]
    assert "/root/out" in ephemeral.message and "overlay" in ephemeral.message
    assert ephemeral.fix.commands[-1] == "cp -a -- /root/out/checkpoint-100 /workspace/out/"

    (nan,) = found["real-loop-nan"]["run.loss-nan"]
    assert "nan" in nan.message and "/workspace/train.log" in nan.message

    # The stall names the stopped rank by the pid the pod sees, beside its blocked peer.
    (stall,) = found["real-loop-stalled"]["run.stalled"]
    assert f"rank 1 (pid {stopped_pid}) is stopped (state T" in stall.message, stall.message
    assert f"`kill -CONT {stopped_pid}`" in stall.fix.advice and "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in stall.fix.advice
    ranks = hosts["real-loop-stalled"].facts.watch.processes.processes[0].ranks
    assert sorted((r.rank, r.state) for r in ranks) in ([(0, "S"), (1, "T")], [(0, "R"), (1, "T")])

    (idle,) = found["real-no-job"]["run.no-job"]
    assert "no training process" in idle.message


def test_a_plain_loops_losses_are_read_through_the_policys_loss_regex(real_runs, run_cli):
    inventory, policy, _ = real_runs
    line = "step 40 | train/loss 25.9530 | lr 0.01"
    default, _ = _loss_patterns({})
    assert not any(p.search(line) for p in default)
    with_policy = run_cli("fleet", "watch", "--once", "-i", str(inventory), "--policy", str(policy), "--format", "json")
    log = with_policy.host("real-loop-healthy").facts.watch.log
    assert len(log.losses) >= 10 and log.loss_steps[-1] >= 100 and log.losses[-1] < log.losses[0]
    without = run_cli("fleet", "watch", "--once", "-i", str(inventory), "--no-policy", "--format", "json")
    assert without.host("real-loop-healthy").facts.watch.log.losses == []
