"""Pods running a fake training job (fake_trainer.py) for the `fleet watch` tests and
bench/watch_bench.py: the files to put in a pod and how to start the job in it."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from sshfleet import Pod

from computefence.demo.fakes import GPU_ACTIVITY_FILE

TRAINER = (Path(__file__).parent / "fake_trainer.py").read_text()
ACTIVITY = "/usr/local/bin/" + GPU_ACTIVITY_FILE
TOKEN = "hf_abcdefghijklmnopqrstuvwx"
FILES = {"/usr/local/bin/torchrun": "#!/usr/bin/python3\n" + TRAINER, "/opt/job/train.py": TRAINER}


def start_trainer(pod: Pod, args: list[str]) -> None:
    """`cd /opt/job && nohup torchrun ... train.py ARGS > /workspace/train.log 2>&1 &`, in the pod."""
    assert pod.sshd_pid is not None
    command = [
        "/usr/local/bin/torchrun",
        "--nproc_per_node=1",
        "train.py",
        *args,
        "--hub_token",
        TOKEN,
        "--gpu-activity",
        ACTIVITY,
    ]
    script = f"cd /opt/job && exec {shlex.join(command)} > /workspace/train.log 2>&1"
    subprocess.Popen(
        ["nsenter", "-t", str(pod.sshd_pid), "-m", "-p", "-r", "--", "/bin/sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(pod: Pod, relative: str, timeout: float = 30) -> None:
    path = Path(str(pod.merged) + relative)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pod.in_namespace(["sh", "-c", f"test -e {shlex.quote(str(path))} && echo yes || true"]).strip():
            return
        time.sleep(0.2)
    raise AssertionError(f"{relative} did not appear in {pod.name}")
