"""The --demo fleet: simulated pods on loopback, each answering as its own machine, gone on exit."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from pathlib import Path

import asyncssh
import pytest

from computefence.connectors.ssh import RunOptions, probe_targets
from computefence.demo.fleet import DEMO_PODS, demo_fleet
from computefence.evaluate import evaluate_host
from computefence.models import HostStatus, Severity


def _processes_under(root: Path) -> list[int]:
    """Processes whose environment points into the demo's directory (the pods' commands)."""
    marker = str(root).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ and state != b"Z":
            found.append(int(entry))
    return found


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


async def _run_on(target, command: str) -> asyncssh.SSHCompletedProcess:
    # The client side exactly as the target describes it: its key, its known_hosts, strict checking.
    async with asyncssh.connect(
        target.host,
        target.port,
        username=target.user,
        client_keys=target.identity_files,
        known_hosts=target.known_hosts,
        agent_path=None,
    ) as conn:
        return await conn.run(command)


def test_every_pod_is_its_own_machine():
    command = (
        'printf "%s\\n" "$HOME" "${HF_HOME:-unset}" "$(pwd)" "$(command -v nvidia-smi)"; '
        'python3 -c "import torch; print(torch.__version__)"; nvidia-smi >/dev/null; echo "smi=$?"'
    )
    with demo_fleet() as fleet:
        reachable = [t for t in fleet.targets if t.name != "pod-unreachable"]

        async def ask_all():
            return await asyncio.gather(*(_run_on(t, command) for t in reachable))

        answers = {t.name: r for t, r in zip(reachable, asyncio.run(ask_all()))}
        root = fleet.root

    for name, result in answers.items():
        pod_root = root / name
        home, hf_home, cwd, smi, _torch_version, _smi_exit = result.stdout.splitlines()
        assert home == str(pod_root / "root")
        assert cwd == str(pod_root / "workspace")
        assert smi == str(pod_root / "bin" / "nvidia-smi")
        if name == "pod-ephemeral-ckpt":
            assert hf_home == "unset"
        else:
            assert hf_home == str(pod_root / "workspace" / ".cache" / "huggingface")
    assert answers["pod-healthy"].stdout.splitlines()[4] == "2.5.1+cu124"
    assert answers["pod-cpu-torch"].stdout.splitlines()[4].endswith("+cpu")
    assert answers["pod-old-driver"].stdout.splitlines()[4] == "2.6.0+cu126"
    assert answers["pod-driver-broken"].stdout.splitlines()[5] == "smi=9"
    assert answers["pod-healthy"].stdout.splitlines()[5] == "smi=0"


def test_the_runner_reaches_every_pod_with_strict_host_keys(tmp_path):
    options = RunOptions(deadline=30, use_user_known_hosts=False, own_known_hosts=tmp_path / "own_known_hosts")
    started = time.monotonic()
    with demo_fleet() as fleet:
        reports = asyncio.run(probe_targets(fleet.targets, options))
        ports = {t.name: t.port for t in fleet.targets}
    elapsed = time.monotonic() - started

    statuses = {r.name: r.status for r in reports}
    assert statuses == {pod.name: HostStatus.OK if pod.reachable else HostStatus.UNREACHABLE for pod in DEMO_PODS}
    assert "connection refused" in next(r.reason for r in reports if r.name == "pod-unreachable")
    # Nothing was trusted on first use: every key came from the demo's known_hosts.
    assert not (tmp_path / "own_known_hosts").exists()
    assert all(_refused(port) for port in ports.values())
    assert elapsed < 15, f"the demo took {elapsed:.1f}s"


def test_the_probe_sees_each_pods_layout(tmp_path):
    options = RunOptions(deadline=30, use_user_known_hosts=False, own_known_hosts=tmp_path / "own")
    with demo_fleet() as fleet:
        reports = {r.name: r for r in asyncio.run(probe_targets(fleet.targets, options))}
        targets = {t.name: t for t in fleet.targets}
    for name, report in reports.items():
        if report.status is not HostStatus.OK:
            continue
        mounts = {m.mount_point: m.fs_type for m in report.facts.storage.mounts}
        workspace = str(Path(targets[name].checks.output_dir).parent)
        assert mounts["/"] == "overlay"
        if name == "pod-ephemeral-ckpt":
            assert workspace not in mounts
        else:
            assert mounts[workspace] == "ext4"


def test_everything_is_gone_after_an_interrupt():
    started_sleep = threading.Event()
    outcome: list[object] = []

    def hold_a_command(target):
        async def run():
            try:
                async with asyncssh.connect(
                    target.host,
                    target.port,
                    username=target.user,
                    client_keys=target.identity_files,
                    known_hosts=target.known_hosts,
                    agent_path=None,
                ) as conn:
                    process = await conn.create_process("sleep 60")
                    started_sleep.set()
                    outcome.append(await process.wait())
            except (OSError, asyncssh.Error) as exc:
                outcome.append(exc)

        asyncio.run(run())

    with pytest.raises(KeyboardInterrupt), demo_fleet() as fleet:
        root = fleet.root
        ports = [t.port for t in fleet.targets]
        client = threading.Thread(target=hold_a_command, args=(fleet.targets[0],))
        client.start()
        assert started_sleep.wait(10)
        deadline = time.monotonic() + 10
        while not _processes_under(root):
            assert time.monotonic() < deadline, "the pod's command never showed up"
            time.sleep(0.02)
        raise KeyboardInterrupt

    client.join(10)
    assert not client.is_alive(), "the client was left hanging on a pod that is gone"
    assert outcome and getattr(outcome[0], "exit_status", None) != 0
    assert not root.exists()
    # SIGKILLed before the fleet returned; the kernel finishes them off a moment later.
    deadline = time.monotonic() + 5
    while _processes_under(root):
        assert time.monotonic() < deadline, f"left running: {_processes_under(root)}"
        time.sleep(0.02)
    assert all(_refused(port) for port in ports)
    assert not [t for t in threading.enumerate() if t.name == "computefence-demo"]


def test_each_fault_is_found_by_the_evaluator(tmp_path, expected_blockers, healthy_pod_warnings):
    options = RunOptions(deadline=30, use_user_known_hosts=False, own_known_hosts=tmp_path / "own")
    with demo_fleet() as fleet:
        reports = {r.name: r for r in asyncio.run(probe_targets(fleet.targets, options))}
        targets = {t.name: t for t in fleet.targets}
    findings = {
        name: evaluate_host(reports[name].facts, targets[name].checks, targets[name].provider)
        for name in expected_blockers
    }
    blockers = {name: {f.check for f in found if f.severity is Severity.BLOCK} for name, found in findings.items()}
    warnings = {name: {f.check for f in found if f.severity is Severity.WARN} for name, found in findings.items()}
    assert blockers == expected_blockers
    assert warnings["pod-healthy"] == healthy_pod_warnings
    assert "storage.hf-cache" in warnings["pod-ephemeral-ckpt"]
