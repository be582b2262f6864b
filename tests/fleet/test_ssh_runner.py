"""The SSH runner's own knobs, against real sshd pods (the CLI tests cover the rest)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
from sshfleet import PodSpec

from computefence import run
from computefence.connectors.ssh import RunOptions, SshConnector, probe_command, probe_targets
from computefence.models import HostStatus, Target

pytestmark = pytest.mark.sshd


def _target(pod, fleet, known_hosts) -> Target:
    return Target(
        name=pod.name,
        host=pod.host,
        port=pod.port,
        user="root",
        identity_files=[str(fleet.identity_file)],
        known_hosts=[str(known_hosts)],
    )


def test_keepalive_notices_a_pod_that_went_silent(ssh_fleet, start_pods, home, tmp_path):
    (frozen,) = start_pods(PodSpec("frozen", nvidia_smi="hang"))
    known = tmp_path / "known_hosts"
    known.write_text(frozen.known_hosts_line())
    stopped = []

    def freeze_mid_probe():
        frozen.wait_for_process("nvidia-smi", timeout=10)
        # The TCP connection stays up; nothing behind it answers any more.
        for pid in frozen.session_processes():
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)

    freezer = threading.Thread(target=freeze_mid_probe)
    freezer.start()
    options = RunOptions(deadline=30, keepalive_interval=0.5, keepalive_count_max=2, own_known_hosts=tmp_path / "own")
    started = time.monotonic()
    try:
        (report,) = asyncio.run(probe_targets([_target(frozen, ssh_fleet, known)], options))
    finally:
        freezer.join()
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)

    assert stopped
    assert report.status is HostStatus.CONNECTION_LOST, report.reason
    assert time.monotonic() - started < 10, "the keepalive, not the 30 s deadline, ended it"


def test_not_checkable_targets_are_reported_without_connecting(home, tmp_path):
    target = Target(
        name="stopped-pod",
        host="192.0.2.1",
        unreachable_reason="the pod is stopped (EXITED)",
        unreachable_fix="runpodctl start pod abc123",
    )
    seen = []

    connector = SshConnector(RunOptions(own_known_hosts=tmp_path / "own"))
    (report,) = asyncio.run(run.probe_targets([target], connector, on_progress=seen.append))

    assert report.status is HostStatus.NOT_CHECKABLE
    assert report.reason == "the pod is stopped (EXITED)"
    assert report.fix.commands == ["runpodctl start pod abc123"]
    assert report.duration_s == 0.0
    # The connector reports the outcome; the run has the evaluator word its fix.
    assert seen == [report.model_copy(update={"fix": None})]


def test_probe_command_is_fixed_text_with_only_the_limit_in_it():
    assert probe_command(42) == probe_command(42.9)
    assert "timeout -k 2 42" in probe_command(42)
    assert probe_command(42).replace("42", "7") == probe_command(7)
