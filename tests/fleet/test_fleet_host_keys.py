"""Host keys end to end: strict by default, --accept-new for first contact only, the loud opt-out."""

from __future__ import annotations

import asyncssh
import pytest
from fleet_helpers import host_entry, write_inventory
from sshfleet import PodSpec

from computefence.connectors.known_hosts import own_known_hosts_path

pytestmark = pytest.mark.sshd


def test_wrong_host_key_is_a_mismatch_naming_the_file(ssh_fleet, healthy_pods, run_cli, tmp_path):
    pod, good = healthy_pods
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    known = pod.known_hosts_line(impostor) + good.known_hosts_line()
    inventory = write_inventory(
        tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod), host_entry(good)], known_hosts_text=known
    )

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--accept-new")

    assert result.code == 1
    host = result.host(pod.name)
    assert host.status.value == "host_key_mismatch"
    known_file = str(inventory.with_suffix(".known_hosts"))
    assert known_file in host.reason
    assert pod.host_key.get_fingerprint() in host.reason
    assert host.fix
    assert result.host(good.name).status.value == "ok"
    # --accept-new never records a key for a host that already has one.
    assert not own_known_hosts_path().exists()


def test_unknown_host_key_is_refused_without_accept_new(ssh_fleet, healthy_pods, run_cli, tmp_path):
    pod = healthy_pods[0]
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)])

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")

    assert result.code == 1
    host = result.host(pod.name)
    assert host.status.value == "host_key_unknown"
    assert pod.host_key.get_fingerprint() in host.reason
    assert host.fix
    assert not own_known_hosts_path().exists()


def test_accept_new_records_first_contact_and_refuses_a_changed_key(ssh_fleet, start_pods, run_cli, tmp_path):
    (pod,) = start_pods(PodSpec("recycled"))
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)])
    own = own_known_hosts_path()

    first = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--accept-new")
    assert first.host(pod.name).status.value == "ok", first.host(pod.name).reason
    assert own.read_text() == pod.known_hosts_line()
    assert own.stat().st_mode & 0o777 == 0o600

    # Trusted from now on, without the flag.
    again = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")
    assert again.host(pod.name).status.value == "ok"

    # The provider hands the address to a new machine: a changed key is never "new".
    ssh_fleet.restart(pod, new_host_key=True)
    changed = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--accept-new")
    host = changed.host(pod.name)
    assert host.status.value == "host_key_mismatch"
    assert str(own) in host.reason
    assert own.read_text().count("\n") == 1


def test_users_own_known_hosts_is_trusted(ssh_fleet, healthy_pods, run_cli, tmp_path, home):
    pod = healthy_pods[0]
    (home / ".ssh" / "known_hosts").write_text(pod.known_hosts_line())
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)])

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json")

    assert result.host(pod.name).status.value == "ok"


def test_known_hosts_option_adds_a_file(ssh_fleet, healthy_pods, run_cli, tmp_path):
    pod = healthy_pods[0]
    extra = tmp_path / "extra_known_hosts"
    extra.write_text(pod.known_hosts_line())
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)])

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--known-hosts", str(extra))

    assert result.host(pod.name).status.value == "ok"
    missing = run_cli("fleet", "check", "-i", str(inventory), "--known-hosts", str(tmp_path / "nope"))
    assert missing.code == 2
    assert "no such file" in missing.stderr


def test_insecure_flag_connects_and_warns_loudly(ssh_fleet, healthy_pods, run_cli, tmp_path):
    pod = healthy_pods[0]
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)])

    result = run_cli("fleet", "check", "-i", str(inventory), "--format", "json", "--insecure-no-host-key-check")

    assert result.host(pod.name).status.value == "ok"
    assert "WARNING: host key verification is OFF" in result.stderr
    assert not own_known_hosts_path().exists()
    both = run_cli("fleet", "check", "-i", str(inventory), "--accept-new", "--insecure-no-host-key-check")
    assert both.code == 2
