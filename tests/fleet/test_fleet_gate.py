"""`fleet check --healthy-out`: the launch gate, end to end against real sshd pods."""

from __future__ import annotations

import json

import pytest
from fleet_helpers import HEALTHY, SPOTLESS, host_entry, started_pods, write_inventory
from sshfleet import PodSpec, closed_port

from computefence.sources.inventory import load_inventory

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def gate_pods(ssh_fleet):
    """ready: nothing to say; warned: a small /dev/shm; blocked: a CPU-only torch."""
    specs = [
        PodSpec("gate-ready", **SPOTLESS),
        PodSpec("gate-warned", **HEALTHY),
        PodSpec("gate-blocked", **dict(SPOTLESS, torch="cpu")),
    ]
    with started_pods(ssh_fleet, specs) as pods:
        yield pods


@pytest.fixture
def gate_inventory(ssh_fleet, gate_pods, tmp_path):
    pods = list(gate_pods.values())
    entries = [host_entry(pod, tags=["gate"]) for pod in pods]
    entries.append({"name": "gate-down", "host": "127.0.0.1", "port": closed_port()})
    return write_inventory(tmp_path / "pool.yaml", ssh_fleet, entries, trusted=pods)


def test_names_file_lists_the_pods_without_blockers(gate_inventory, run_cli, tmp_path):
    ready = tmp_path / "ready.txt"
    result = run_cli("fleet", "check", "-i", str(gate_inventory), "--healthy-out", str(ready), "--format", "json")

    assert result.code == 1  # a blocked pod and an unreachable one
    hosts = {h.name: h for h in result.report.hosts}
    assert hosts["gate-blocked"].blockers and hosts["gate-warned"].warnings and not hosts["gate-warned"].blockers
    assert ready.read_text() == "gate-ready\ngate-warned\n"


def test_fail_on_warn_leaves_warned_pods_out(gate_inventory, run_cli, tmp_path):
    ready = tmp_path / "ready.txt"
    run_cli("fleet", "check", "-i", str(gate_inventory), "--healthy-out", str(ready), "--fail-on", "warn")
    assert ready.read_text() == "gate-ready\n"


def test_ssh_format_is_user_at_host_and_port(gate_inventory, gate_pods, run_cli, tmp_path):
    ready = tmp_path / "ready.ssh"
    run_cli(
        "fleet",
        "check",
        "-i",
        str(gate_inventory),
        "--healthy-out",
        str(ready),
        "--healthy-format",
        "ssh",
        "--fail-on",
        "warn",
    )
    pod = gate_pods["gate-ready"]
    assert ready.read_text() == f"root@{pod.host} -p {pod.port}\n"


def test_json_format_lists_names_addresses_and_tags(gate_inventory, gate_pods, run_cli, tmp_path):
    ready = tmp_path / "ready.json"
    run_cli("fleet", "check", "-i", str(gate_inventory), "--healthy-out", str(ready), "--healthy-format", "json")
    entries = json.loads(ready.read_text())
    assert [(e["name"], e["host"], e["port"], e["user"], e["tags"]) for e in entries] == [
        (name, gate_pods[name].host, gate_pods[name].port, "root", ["gate"]) for name in ("gate-ready", "gate-warned")
    ]


def test_inventory_format_loads_back_and_passes_a_second_check(gate_inventory, run_cli, tmp_path):
    ready = tmp_path / "ready.yaml"
    run_cli(
        "fleet",
        "check",
        "-i",
        str(gate_inventory),
        "--healthy-out",
        str(ready),
        "--healthy-format",
        "inventory",
        "--fail-on",
        "warn",
    )

    original = {t.name: t for t in load_inventory(gate_inventory)}
    (target,) = load_inventory(ready)
    # The same pod with the same checks, identity and known_hosts: a sweep launched from it sees what was checked.
    assert target.model_dump(exclude={"source"}) == original["gate-ready"].model_dump(exclude={"source"})
    again = run_cli("fleet", "check", "-i", str(ready), "--fail-on", "warn", "--format", "json")
    assert again.code == 0 and [h.name for h in again.report.hosts] == ["gate-ready"]


@pytest.mark.parametrize("fmt", ["names", "ssh", "inventory", "json"])
def test_no_ready_pod_replaces_the_old_file_with_an_empty_one(fmt, gate_inventory, run_cli, tmp_path):
    ready = tmp_path / "ready.out"
    ready.write_text("stale-pod-from-yesterday\n")
    result = run_cli(
        "fleet",
        "check",
        "-i",
        str(gate_inventory),
        "--limit",
        "gate-blocked,gate-down",
        "--healthy-out",
        str(ready),
        "--healthy-format",
        fmt,
    )
    assert result.code == 1
    assert ready.read_text() == ("[]\n" if fmt == "json" else "")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ready")] == []  # no temp file left


def test_a_gate_file_that_cannot_be_written_fails_before_connecting(gate_inventory, run_cli, tmp_path):
    result = run_cli(
        "fleet", "check", "-i", str(gate_inventory), "--healthy-out", str(tmp_path / "no-such-dir" / "r.txt")
    )
    assert result.code == 2 and result.stdout == ""
    # One line and no progress lines: no pod was contacted.
    assert (
        result.stderr
        == f"computefence: error: --healthy-out {tmp_path / 'no-such-dir' / 'r.txt'}: directory {tmp_path / 'no-such-dir'} does not exist\n"
    )
