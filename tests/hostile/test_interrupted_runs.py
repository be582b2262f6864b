"""Ctrl-C on a fleet run (the user's own hand, not an attacker, but the same rule): a good
report on disk is not replaced by a half-finished one, and the pods are left clean at once."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "fleet"))

from fleet_helpers import CLI, HEALTHY, cli_subprocess_env, host_entry, write_inventory  # noqa: E402
from sshfleet import PodSpec  # noqa: E402


def test_ctrl_c_keeps_the_previous_report_and_leaves_the_pod_clean(ssh_fleet, start_pods, tmp_path):
    good, hung = start_pods(PodSpec("int-fine", **HEALTHY), PodSpec("int-hung", nvidia_smi="hang", torch="cu124"))
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(good), host_entry(hung)], trusted=[good, hung]
    )
    previous = tmp_path / "prev.json"
    previous.write_text('{"a good": "report"}\n')
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    proc = subprocess.Popen(
        [*CLI, "fleet", "check", "-i", str(inventory), "--format", "json", "-o", str(previous), "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_subprocess_env(home),
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    try:
        seen: list[str] = []
        while not any(f"{good.name}: checked" in line for line in seen):
            seen.append(lines.get(timeout=60))
        hung.wait_for_process("nvidia-smi")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        cancelled_at = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = "".join(seen) + "".join(iter_queue(lines))

    assert proc.returncode == 130, stderr
    assert previous.read_text() == '{"a good": "report"}\n'
    assert f"nothing written (--output {previous} left untouched)" in stderr
    # Within 2 s of the CLI's exit nothing of the run is left on the pod: no sshd session,
    # no `timeout`, no probe, no hung nvidia-smi.
    left = leftovers(hung)
    while left and time.monotonic() - cancelled_at < 2:
        time.sleep(0.05)
        left = leftovers(hung)
    assert left == []


def leftovers(pod) -> list[str]:
    return [
        cmd
        for pid, cmd in pod.pid_namespace_processes()
        if pid != pod.sshd_pid and not cmd.startswith("sshd: [listener]") and "sleep infinity" not in cmd
    ]


def iter_queue(lines: queue.Queue[str]):
    while True:
        try:
            yield lines.get(timeout=1)
        except queue.Empty:
            return
