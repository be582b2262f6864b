"""Ctrl-C at any moment of a command that waits on a provider: one line, exit 130 at once,
nothing written. A real CLI process gets SIGINT while a real HTTP server on loopback trickles
its answer (each byte well within a socket timeout, the whole answer never within the 10 s
deadline, three tries: some 33 s of waiting that a Ctrl-C must cut short)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "providers"))
sys.path.insert(0, str(TESTS / "fleet"))

from fake_api import FakeProviderApi, Fault, lambda_instance, runpod_pod, vast_instance  # noqa: E402
from fleet_helpers import CLI, HEALTHY, cli_subprocess_env, host_entry, write_inventory  # noqa: E402
from sshfleet import PodSpec  # noqa: E402

from computefence.connectors.ssh import RunOptions, SshConnector  # noqa: E402
from computefence.models import (  # noqa: E402
    Facts,
    Finding,
    GpuDevice,
    GpuFacts,
    HostReport,
    HostStatus,
    Remedy,
    Report,
    Severity,
    StepKind,
    StepPlace,
    Target,
)
from computefence.operations.fix import ApplyOptions, FixHost, StepRecord, apply_all  # noqa: E402
from computefence.sources.lambda_cloud import LambdaSource  # noqa: E402
from computefence.sources.runpod import RunPodSource  # noqa: E402
from computefence.sources.vast import VastSource  # noqa: E402

# From SIGINT to exit: the CLI's own teardown on a loaded machine, far below one deadline.
PROMPTLY_S = 5.0
TRICKLE = Fault(status=200, body=b" " * 4000 + b"{}", trickle_s=0.05)
URL_VARS = {"runpod": "RUNPOD_API_BASE_URL", "vast": "VAST_URL", "lambda": "LAMBDA_API_URL"}
KEY_VARS = {"runpod": "RUNPOD_API_KEY", "vast": "VAST_API_KEY", "lambda": "LAMBDA_API_KEY"}
SOURCES = {"runpod": RunPodSource, "vast": VastSource, "lambda": LambdaSource}


@pytest.fixture
def api(tmp_path, monkeypatch):
    """The fake provider APIs, one pod each, the keys and URLs exported here and for the CLI."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with FakeProviderApi() as fake:
        for provider in URL_VARS:
            monkeypatch.setenv(URL_VARS[provider], fake.base_url(provider))
            monkeypatch.setenv(KEY_VARS[provider], fake.keys[provider])
        monkeypatch.delenv("VAST_API_URL", raising=False)
        fake.runpod_pods = [runpod_pod("rp1ecc", "rp-ecc")]
        fake.vast_instances = [vast_instance(4242, "vast-ecc")]
        fake.lambda_instances = [lambda_instance("0920582c7ff041399e34823a0be62549", "lambda-ecc")]
        yield fake


def _condemned(target: Target) -> HostReport:
    """The pod as a saved report shows it: ready to give back (an ECC blocker, idle GPUs)."""
    ecc = Finding(check="gpu.ecc", severity=Severity.BLOCK, message="ECC", remedy=Remedy.REPLACE, subject="GPU 0")
    gpu = GpuDevice(index=0, name="NVIDIA H100 80GB HBM3", memory_used_mib=3, memory_total_mib=81559)
    return HostReport(
        name=target.name,
        status=HostStatus.OK,
        host=target.host,
        port=target.port,
        provider=target.provider,
        facts=Facts(gpu=GpuFacts(nvidia_smi_found=True, exit_code=0, gpus=[gpu])),
        findings=[ecc],
    )


def _saved_report(api: FakeProviderApi, provider: str, path: Path) -> Path:
    (target,) = SOURCES[provider]().targets()
    api.requests.clear()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    report = Report(tool_version="test", kind="fleet", generated_at=now, hosts=[_condemned(target)])
    path.write_text(report.model_dump_json())
    return path


def _interrupted(api: FakeProviderApi, provider: str, argv: list[str], home: Path, requests: int = 1):
    """Run the CLI, SIGINT it once the provider has seen `requests` requests (the last one
    being trickled): (exit status, stdout, stderr, seconds from SIGINT to exit)."""
    home.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_subprocess_env(home)
    )
    try:
        deadline = time.monotonic() + 60
        while len(api.seen(provider)) < requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(api.seen(provider)) >= requests, proc.communicate(timeout=60)
        time.sleep(0.5)  # well inside the trickled answer
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        return proc.returncode, out, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _one_interrupt_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("provider", ["runpod", "vast", "lambda"])
def test_ctrl_c_while_fleet_release_lists_a_trickling_provider_again(api, provider, tmp_path):
    report = _saved_report(api, provider, tmp_path / "report.json")
    api.fail(provider, TRICKLE, times=3)
    out, log = tmp_path / "result.json", tmp_path / "actions.jsonl"
    argv = ["fleet", "release", "--from", str(report), "--yes", "--action", "terminate"]

    code, stdout, err, took = _interrupted(
        api, provider, [*argv, "-f", "json", "-o", str(out), "--log", str(log)], tmp_path / "home"
    )

    assert code == 130 and took < PROMPTLY_S, (took, err)
    assert _one_interrupt_line(err) == (
        f"computefence: interrupted; no provider call was sent; nothing written (--output {out} left untouched)"
    )
    assert stdout == "" and not out.exists() and not log.exists()
    assert [r.method for r in api.seen(provider)] == ["GET" if provider != "runpod" else "POST"]


def test_ctrl_c_while_a_release_call_is_answered_slowly_says_it_was_sent(api, tmp_path):
    report = _saved_report(api, "vast", tmp_path / "report.json")
    # The listing is answered at once: only the DELETE trickles.
    api.fail("vast", Fault(status=200, body=b" " * 4000 + b'{"success": true}', trickle_s=0.05, method="DELETE"))
    out, log = tmp_path / "result.json", tmp_path / "actions.jsonl"
    argv = ["fleet", "release", "--from", str(report), "--yes", "--action", "terminate", "-o", str(out)]

    code, _, err, took = _interrupted(api, "vast", [*argv, "--log", str(log)], tmp_path / "home", requests=2)

    assert code == 130 and took < PROMPTLY_S, (took, err)
    assert _one_interrupt_line(err) == (
        f"computefence: interrupted; 1 provider call sent, not all answered: see {log} and the provider's console; "
        f"nothing written (--output {out} left untouched)"
    )
    assert [json.loads(line)["event"] for line in log.read_text().splitlines()] == ["send"]
    assert not out.exists()


@pytest.mark.parametrize("command", [["inventory", "list"], ["fleet", "check", "-f", "json"]])
def test_ctrl_c_while_a_provider_trickles_its_listing(api, command, tmp_path):
    api.fail("vast", TRICKLE, times=3)
    out = tmp_path / "out.json"
    argv = [*command, "--provider", "vast"] + (["-o", str(out)] if "check" in command else [])

    code, stdout, err, took = _interrupted(api, "vast", argv, tmp_path / "home")

    assert code == 130 and took < PROMPTLY_S, (took, err)
    assert _one_interrupt_line(err).startswith("computefence: interrupted")
    assert stdout == "" and not out.exists()


# A `mkdir` that ignores TERM (inherited by its sleep), under a `sh -c` that does not: TERM ends
# the shell, `timeout` sees its child gone and exits, and the sleep was left running for good.
DEAF_MKDIR = {"/usr/local/bin/mkdir": "#!/bin/sh\ntrap '' TERM\nexec sleep 600\n"}
# TERM, the 5 s grace before KILL, and the CLI's own teardown.
AFTER_GRACE_S = 12.0


def test_ctrl_c_while_a_fix_step_ignores_term_ends_within_the_grace(ssh_fleet, start_pods, tmp_path):
    (pod,) = start_pods(PodSpec("deaf-step", **dict(HEALTHY, shm_size="16g", files=DEAF_MKDIR)))
    checks = {"output_dir": "/workspace/runs/7/ckpt"}
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod], checks=checks)
    out = tmp_path / "fix.json"
    argv = [*CLI, "fleet", "fix", "-i", str(inventory), "--only", "storage.output-dir", "--apply", "--yes"]
    (tmp_path / "home").mkdir()
    proc = subprocess.Popen(
        [*argv, "--format", "json", "--output", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_subprocess_env(tmp_path / "home"),
    )
    try:
        sleeper = pod.wait_for_process("sleep 600", timeout=60)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == 130 and took < AFTER_GRACE_S, (took, err)
    assert _one_interrupt_line(err) == (
        f"computefence: interrupted; 1 step ran before it; nothing written (--output {out} left untouched)"
    )
    assert not out.exists()
    assert sleeper not in [pid for pid, _ in pod.pid_namespace_processes()]


def test_ctrl_c_while_a_fix_steps_connection_hangs_skips_the_pod_at_once(tmp_path):
    """A port that accepts and never speaks SSH holds a connect for its whole limit: the stop that
    a Ctrl-C sets ends the wait for the fix's session, and its steps are skipped as interrupted."""
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    target = Target(name="silent", host="127.0.0.1", port=port, user="root")
    connector = SshConnector(RunOptions(connect_timeout=60.0, insecure_no_host_key_check=True))
    step = StepRecord(
        check="storage.output-dir", run="mkdir -p /x", on=StepPlace.POD, kind=StepKind.SAFE, status="planned"
    )
    plan = FixHost(name="silent", steps=[step])

    async def interrupted_after(delay: float) -> tuple[list, float]:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(delay, stop.set)
        started = time.monotonic()
        done = await apply_all([plan], lambda _name: connector.open_shell(target), ApplyOptions(), stop)
        return done, time.monotonic() - started

    try:
        [(host, _)], took = asyncio.run(interrupted_after(0.5))
    finally:
        silent.close()
    assert took < PROMPTLY_S, took
    assert [(s.status, s.reason) for s in host.steps] == [("skipped", "interrupted while connecting")]
