"""Ctrl-C on a fleet run (the user's own hand, not an attacker, but the same rule): a good
report on disk is not replaced by a half-finished one, and the pods are left clean at once."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "fleet"))

from fleet_helpers import CLI, HEALTHY, cli_subprocess_env, host_entry, write_inventory  # noqa: E402
from sshfleet import PodSpec  # noqa: E402


def _interrupted_run(good, hung, inventory: Path, home: Path, *argv: str) -> tuple[int, str, str, float]:
    """`fleet check` on the two pods, Ctrl-C once `good` is checked and `hung` hangs in
    nvidia-smi: (exit status, stdout, stderr, when it exited)."""
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [*CLI, "fleet", "check", "-i", str(inventory), "--timeout", "60", *argv],
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
        out = proc.stdout.read()
        proc.wait(timeout=30)
        cancelled_at = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, "".join(seen) + "".join(iter_queue(lines)), cancelled_at


@pytest.fixture
def two_pods(ssh_fleet, start_pods, tmp_path):
    good, hung = start_pods(PodSpec("int-fine", **HEALTHY), PodSpec("int-hung", nvidia_smi="hang", torch="cu124"))
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(good), host_entry(hung)], trusted=[good, hung]
    )
    return good, hung, inventory


def test_ctrl_c_keeps_the_previous_report_and_leaves_the_pod_clean(two_pods, tmp_path):
    good, hung, inventory = two_pods
    previous = tmp_path / "prev.json"
    previous.write_text('{"a good": "report"}\n')
    code, _, stderr, cancelled_at = _interrupted_run(
        good, hung, inventory, tmp_path / "home", "--format", "json", "-o", str(previous)
    )

    assert code == 130, stderr
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


# A pod checked and blocked before the Ctrl-C: the partial report must not read as BLOCKED.
@pytest.mark.parametrize("fmt", ["rich", "json", "markdown"])
def test_a_report_interrupted_after_some_pods_says_interrupted_and_writes_no_history(fmt, two_pods, tmp_path):
    good, hung, inventory = two_pods
    history = tmp_path / "runs"
    code, out, stderr, _ = _interrupted_run(
        good, hung, inventory, tmp_path / "home", "--format", fmt, "--history", str(history)
    )
    assert code == 130, stderr
    assert stderr.splitlines()[-1] == (
        f"computefence: interrupted; 1 of 2 pods were not checked; nothing written (--history {history} left untouched)"
    )
    assert [p.name for p in history.iterdir() if p.name != ".lock"] == []
    if fmt == "json":
        report = json.loads(out)
        assert report["interrupted"] is True
        assert {h["name"]: h["status"] for h in report["hosts"]} == {good.name: "ok", hung.name: "cancelled"}
    elif fmt == "markdown":
        heading = next(line for line in out.splitlines() if line.startswith("## "))
        assert heading.endswith(": INTERRUPTED") and "BLOCKED" not in heading, heading
        assert "stopped before every pod was checked: " in out
    else:
        (verdict,) = [line for line in out.splitlines() if "INTERRUPTED" in line or "BLOCKED" in line]
        assert verdict.startswith(" INTERRUPTED  stopped before every pod was checked: "), verdict


def test_ctrl_c_after_the_report_is_written_exits_130_and_keeps_the_complete_report(tmp_path):
    """The report and the history entry are written, the alert is on its way: a Ctrl-C now is
    still exit 130 (the user asked to stop, so `fleet check && launch` launches nothing), and
    what was written is the complete report."""
    from webhook_server import Answer, WebhookServer

    from computefence.render.json import load_report

    report, history = tmp_path / "report.json", tmp_path / "runs"
    home = tmp_path / "home"
    home.mkdir()
    with WebhookServer(Answer(204, delay_s=20)) as hook:
        env = dict(cli_subprocess_env(home), COMPUTEFENCE_NOTIFY=hook.url)
        proc = subprocess.Popen(
            [*CLI, "fleet", "check", "--demo", "--format", "json", "-o", str(report), "--history", str(history)]
            + ["--notify-on", "always"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            deadline = time.monotonic() + 60
            while not hook.received and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert hook.received, proc.communicate()
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and stderr.splitlines()[-1] == "computefence: interrupted", stderr
    saved = load_report(report)
    assert len(saved.hosts) == 6 and not saved.interrupted
    assert len(list(history.glob("*.json"))) == 1


def test_ctrl_c_counts_the_pods_not_checked_as_the_report_does(ssh_fleet, start_pods, tmp_path):
    """An unreachable pod is not checked as well as the one the Ctrl-C stopped: stderr and
    the report's verdict line give the same count."""
    import socket

    good, hung = start_pods(PodSpec("cnt-fine", **HEALTHY), PodSpec("cnt-hung", nvidia_smi="hang", torch="cu124"))
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    gone = {"name": "cnt-gone", "host": "127.0.0.1", "port": closed.getsockname()[1]}
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(good), host_entry(hung), gone], trusted=[good, hung]
    )
    try:
        code, out, stderr, _ = _interrupted_run(good, hung, inventory, tmp_path / "home")
    finally:
        closed.close()

    assert code == 130, stderr
    assert "interrupted; 2 of 3 pods were not checked (1 stopped by the interrupt)" in stderr.splitlines()[-1]
    assert "2 of 3 pods not checked" in out
