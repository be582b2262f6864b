"""known_hosts markers from OpenSSH: a @revoked key is refused with the file and line that
revoked it, and no fix undoes the revocation or offers --accept-new; a @cert-authority entry
is named when a pod offers a plain key instead of a certificate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import asyncssh

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
from fleet_helpers import CLI, cli_subprocess_env, host_entry, json_hosts, write_inventory
from sshfleet import PodSpec


def _check(tmp_path, ssh_fleet, pod, known_hosts_text, *flags):
    inventory = write_inventory(tmp_path / "pods.yaml", ssh_fleet, [host_entry(pod)], known_hosts_text=known_hosts_text)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [*CLI, "fleet", "check", "-i", str(inventory), "--format", "json", *flags],
        capture_output=True,
        text=True,
        env=cli_subprocess_env(home),
        timeout=120,
    )
    return result, json_hosts(result.stdout)[pod.name], tmp_path / "pods.known_hosts"


def test_a_revoked_key_names_its_line_and_gets_no_accept_new(ssh_fleet, start_pods, tmp_path):
    (pod,) = start_pods(PodSpec("revoked-key"))
    revoked = "# keys we no longer trust\n@revoked " + pod.known_hosts_line()
    result, host, known = _check(tmp_path, ssh_fleet, pod, revoked, "--accept-new")
    assert result.returncode == 1, result.stderr
    assert host["status"] == "host_key_mismatch"
    assert host["reason"] == f"the host key of [{pod.host}]:{pod.port} is revoked in {known}:2"
    # An advice-only fix (JSON shows it as its text): no ssh-keygen -R that would undo the revocation.
    assert host["fix"].startswith("someone revoked this key on purpose: do not connect")
    assert "--accept-new" not in host["fix"] and "ssh-keygen" not in host["fix"]


def test_a_plain_key_where_a_cert_authority_is_trusted_says_so(ssh_fleet, start_pods, tmp_path):
    (pod,) = start_pods(PodSpec("ca-only"))
    ca = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    _result, host, _known = _check(tmp_path, ssh_fleet, pod, f"@cert-authority [{pod.host}]:{pod.port} {ca}\n")
    assert host["status"] == "host_key_mismatch"
    assert "is trusted only through a @cert-authority in" in host["reason"]
    assert "offered no host certificate signed by it" in host["reason"]
