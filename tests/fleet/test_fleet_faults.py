"""Every pod fault ends in its own status, through the CLI, next to a healthy pod it never spoils."""

from __future__ import annotations

import time

import pytest
from fleet_helpers import host_entry, write_inventory
from sshfleet import PodSpec, SilentTcpServer, closed_port

pytestmark = pytest.mark.sshd

INTERPRETERS = {
    # Crash noise and bytes that are not UTF-8, exit 0: the kind of thing a broken image prints.
    "garbage": "#!/bin/sh\nprintf 'Segmentation fault (core dumped)\\n\\001\\377\\376 not a probe\\n'\n",
    # An interpreter that never stops talking.
    "oversized": "#!/bin/sh\nexec yes computefence-garbage-computefence-garbage\n",
    # ... or never stops complaining, on stderr, and never exits.
    "oversized-stderr": "#!/bin/sh\nyes computefence-noise >&2\nexec sleep 600\n",
    # Wedged, and deaf to SIGTERM: only the pod-side SIGKILL ends it.
    "wedged": "#!/bin/sh\ntrap '' TERM\nexec sleep 600\n",
}


def _fake_python(kind: str) -> dict:
    return {"files": {"/usr/local/bin/python3": INTERPRETERS[kind]}}


FAULTS = {
    "auth": (dict(authorize_client=False), "auth_failed", "rejected every key"),
    "no-python": (dict(hide=["/usr/bin/python3"]), "no_python", "neither python3 nor python"),
    "garbage-output": (_fake_python("garbage"), "probe_failed", "not JSON"),
    "oversized-output": (_fake_python("oversized"), "probe_failed", "more than 8 MiB"),
    "oversized-stderr": (_fake_python("oversized-stderr"), "probe_failed", "more than 64 KiB on stderr"),
    "wedged-interpreter": (_fake_python("wedged"), "timeout", "4 s deadline"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_pod_fault_gets_its_status_and_spares_the_healthy_pod(
    fault, ssh_fleet, healthy_pods, start_pods, run_cli, tmp_path
):
    spec, status, reason = FAULTS[fault]
    (bad,) = start_pods(PodSpec(f"bad-{fault}", **spec))
    good = healthy_pods[0]
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(bad), host_entry(good)], trusted=[bad, good]
    )

    # Only the wedged interpreter needs a short deadline; the healthy pod gets the default.
    deadline = ["--timeout", "4"] if fault == "wedged-interpreter" else []
    started = time.monotonic()
    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", *deadline)
    elapsed = time.monotonic() - started

    assert result.code == 1, result.stderr
    failed = result.host(bad.name)
    assert failed.status.value == status, failed.reason
    assert reason in failed.reason
    assert failed.fix, "every non-ok pod carries a fix"
    assert failed.facts is None and failed.findings == []
    healthy = result.host(good.name)
    assert healthy.status.value == "ok" and healthy.facts is not None
    assert healthy.facts.identity.hostname == good.name
    if fault == "wedged-interpreter":
        assert elapsed < 8
        # Killed on the pod, not left running: -k 2 after the limit, a second or two after the deadline.
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and any("sleep 600" in cmd for _, cmd in bad.pid_namespace_processes()):
            time.sleep(0.2)
        assert not any("sleep 600" in cmd for _, cmd in bad.pid_namespace_processes())


def test_python_fallback_when_python3_is_missing(ssh_fleet, start_pods, run_cli, tmp_path):
    (pod,) = start_pods(
        PodSpec(
            "only-python",
            hide=["/usr/bin/python3"],
            files={"/usr/local/bin/python": '#!/bin/sh\nexec /usr/bin/python3.11 "$@"\n'},
        )
    )
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], trusted=[pod])

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")

    host = result.host(pod.name)
    assert host.status.value == "ok", host.reason
    assert host.facts.identity.hostname == pod.name


def test_closed_port_is_unreachable(ssh_fleet, healthy_pods, run_cli, tmp_path):
    good = healthy_pods[0]
    port = closed_port()
    inventory = write_inventory(
        tmp_path / "pods.yaml",
        ssh_fleet,
        [{"name": "closed", "host": "127.0.0.1", "port": port}, host_entry(good)],
        trusted=[good],
    )

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")

    assert result.code == 1
    closed = result.host("closed")
    assert closed.status.value == "unreachable"
    assert "refused" in closed.reason and str(port) in closed.reason
    assert result.host(good.name).status.value == "ok"


def test_tcp_server_that_never_speaks_ssh_times_out(ssh_fleet, healthy_pods, run_cli, tmp_path):
    good = healthy_pods[0]
    silent = SilentTcpServer()
    try:
        inventory = write_inventory(
            tmp_path / "pods.yaml",
            ssh_fleet,
            [{"name": "silent", "host": silent.host, "port": silent.port}, host_entry(good)],
            trusted=[good],
        )
        started = time.monotonic()
        result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--connect-timeout", "1.5")
        elapsed = time.monotonic() - started
    finally:
        silent.close()

    stuck = result.host("silent")
    assert stuck.status.value == "timeout"
    assert "no SSH handshake" in stuck.reason and "1.5 s" in stuck.reason
    assert result.host(good.name).status.value == "ok"
    assert 1.4 < elapsed < 6


def test_unresolvable_host_is_unreachable(ssh_fleet, run_cli, tmp_path):
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [{"name": "typo", "host": "pod-that-does-not-exist.invalid", "port": 22}]
    )

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")

    host = result.host("typo")
    assert host.status.value == "unreachable"
    assert "cannot resolve pod-that-does-not-exist.invalid" in host.reason
